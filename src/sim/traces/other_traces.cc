#include "sim/traces/other_traces.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "formats/json_fast_path.h"
#include "formats/json_input.h"
#include "sim/traces/csv.h"

namespace toposched::sim {

namespace {

void shift_to_zero(Trace& t) {
  double first = std::numeric_limits<double>::infinity();
  for (const SimJob& j : t.jobs) first = std::min(first, j.submit_s);
  if (!std::isfinite(first)) return;
  for (SimJob& j : t.jobs) j.submit_s -= first;
}

Result<Trace> finish(Trace trace, const std::string& file) {
  shift_to_zero(trace);
  if (auto ok = finalize_trace(trace); !ok) {
    Error e = ok.error();
    e.where.file = file;
    return tl::unexpected(e);
  }
  return trace;
}


std::string_view field(const csv::Record& r, int i) {
  return i >= 0 && static_cast<std::size_t>(i) < r.fields.size() ? trim(r.fields[static_cast<std::size_t>(i)]) : std::string_view();
}

}  // namespace

// ---------------------------------------------------------------- Alibaba PAI v2020
namespace {

// A PAI job as its tasks add up: GPUs summed, times spanned, one GPU model or mixed.
struct PaiJob {
  double start = std::numeric_limits<double>::infinity(), end = -1;
  long long gpus = 0;
  std::string model;
  bool mixed_model = false, unfinished = false;
  std::size_t order = 0;  // first appearance in the task table
};
using PaiJobs = std::map<std::string, PaiJob>;

// The job table: submit time by job name.
Result<std::map<std::string, double>> pai_submit_times(const TextFile& jobs, Trace& trace, const TraceReadOptions& options) {
  std::map<std::string, double> submit;
  csv::Reader reader(jobs.text, jobs.name);
  for (bool first = true;; first = false) {
    auto rec = reader.next();
    if (!rec) return tl::unexpected(rec.error());
    if (!*rec) break;
    const csv::Record& r = **rec;
    if (first && field(r, 0) == "job_name") continue;  // an optional header
    if (r.fields.size() != 6) {
      auto ok = reject_row(trace, options, csv::field_error(jobs.name, r, static_cast<int>(r.fields.size()) - 1,
          fmt::format("a PAI job table row has 6 fields (job_name,inst_id,user,status,start_time,end_time), found {}", r.fields.size())).value());
      if (!ok) return tl::unexpected(ok.error());
      continue;
    }
    auto t = csv::to_double(jobs.name, r, 4, "start_time");
    if (!t) {
      if (auto ok = reject_row(trace, options, t.error()); !ok) return tl::unexpected(ok.error());
      continue;
    }
    submit[std::string(field(r, 0))] = *t;
  }
  return submit;
}

// One task table row, added to its job.
Result<void> add_pai_task(const csv::Record& r, const std::string& file, PaiJobs& agg, std::size_t& order) {
  if (r.fields.size() != 10)
    return csv::field_error(file, r, static_cast<int>(r.fields.size()) - 1,
        fmt::format("a PAI task table row has 10 fields (job_name,task_name,inst_num,status,start_time,end_time,"
                    "plan_cpu,plan_mem,plan_gpu,gpu_type), found {}", r.fields.size()));
  std::string job(field(r, 0));
  if (job.empty()) return csv::field_error(file, r, 0, "expected a job_name, found an empty field");
  auto inst = csv::to_double(file, r, 2, "inst_num");
  if (!inst) return tl::unexpected(inst.error());
  if (*inst < 0 || *inst > 1e6) return csv::field_error(file, r, 2, fmt::format("inst_num must be in 0..1000000, found {}", *inst));
  double plan_gpu = 0;
  if (!field(r, 8).empty()) {
    auto g = csv::to_double(file, r, 8, "plan_gpu");
    if (!g) return tl::unexpected(g.error());
    if (*g < 0 || *g > 10000) return csv::field_error(file, r, 8, fmt::format("plan_gpu must be in 0..10000 (percent of a GPU), found {}", *g));
    plan_gpu = *g;
  }
  PaiJob& a = agg[job];
  if (a.gpus == 0 && a.end < 0 && !std::isfinite(a.start)) a.order = order++;
  a.gpus += static_cast<long long>(std::llround(*inst)) * static_cast<long long>(std::ceil(plan_gpu / 100.0 - 1e-9));
  if (field(r, 4).empty() || field(r, 5).empty()) {
    a.unfinished = true;
  } else {
    auto s = csv::to_double(file, r, 4, "start_time");
    if (!s) return tl::unexpected(s.error());
    auto e = csv::to_double(file, r, 5, "end_time");
    if (!e) return tl::unexpected(e.error());
    if (*e < *s) return csv::field_error(file, r, 5, fmt::format("end_time {} is before start_time {}", *e, *s));
    a.start = std::min(a.start, *s);
    a.end = std::max(a.end, *e);
  }
  std::string model(field(r, 9));
  if (plan_gpu > 0 && !model.empty() && model != "MISC") {
    if (a.model.empty()) a.model = model;
    else if (a.model != model) a.mixed_model = true;
  }
  return {};
}

// The task table, aggregated by job.
Result<PaiJobs> pai_jobs(const TextFile& tasks, Trace& trace, const TraceReadOptions& options) {
  PaiJobs agg;
  std::size_t order = 0;
  csv::Reader reader(tasks.text, tasks.name);
  for (bool first = true;; first = false) {
    auto rec = reader.next();
    if (!rec) return tl::unexpected(rec.error());
    if (!*rec) break;
    const csv::Record& r = **rec;
    if (first && field(r, 0) == "job_name") continue;
    if (auto ok = add_pai_task(r, tasks.name, agg, order); !ok)
      if (auto ok2 = reject_row(trace, options, ok.error()); !ok2) return tl::unexpected(ok2.error());
  }
  return agg;
}

// The jobs that ran on GPUs and finished, in the order they first appear.
void emit_pai_jobs(PaiJobs& agg, const std::map<std::string, double>& submit, Trace& trace) {
  std::vector<std::pair<std::size_t, SimJob>> out;
  for (auto& [name, a] : agg) {
    if (a.gpus <= 0 || a.unfinished || a.end <= a.start || a.gpus > 10'000'000) {
      ++trace.ignored_rows;
      continue;
    }
    SimJob j;
    j.id = name;
    j.gpus = static_cast<int>(a.gpus);
    auto it = submit.find(name);
    j.submit_s = it != submit.end() ? std::min(it->second, a.start) : a.start;
    j.duration_s = a.end - a.start;
    if (!a.mixed_model) j.gpu_model = a.model;
    out.emplace_back(a.order, std::move(j));
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (auto& [o, j] : out) trace.jobs.push_back(std::move(j));
}

}  // namespace

// Phases: the job table's submit times (optional) → the task table by job → the jobs.
Result<Trace> read_pai_v2020(const TextFile& tasks, const std::optional<TextFile>& jobs, const TraceReadOptions& options) {
  Trace trace;
  trace.source = tasks.name;
  trace.format = "pai-v2020";
  std::map<std::string, double> submit;
  if (jobs) {
    TOPOSCHED_TRY(times, pai_submit_times(*jobs, trace, options));
    submit = std::move(times);
  }
  TOPOSCHED_TRY(agg, pai_jobs(tasks, trace, options));
  emit_pai_jobs(agg, submit, trace);
  return finish(std::move(trace), tasks.name);
}

// ---------------------------------------------------------------- Philly
namespace {

namespace sj = simdjson::ondemand;
using json_fast_path::FastPathDeclines;
using json_fast_path::for_each_field;

// A value the reader does not use, walked for what parse_json_document would refuse in it.
void check_json_value(sj::value v, int depth) { json_fast_path::check_unused(v, depth, json_fast_path::ExactReader::kNlohmann); }

// The fast path (formats/json_fast_path.h): the job log read with simdjson On Demand job by
// job, without nlohmann's document tree (11.6 s for a 50 MB log: docs/performance.md). It
// gives exactly read_philly_exact's jobs or declines: on every row that path reports as an
// error (so --skip-bad-rows and every message stay that path's), on a repeated key, and on
// whatever JSON it does not read as parse_json_document does (json_fast_path::check_unused).
class PhillyFastPath {
 public:
  explicit PhillyFastPath(Trace& trace) : trace_(trace) {}

  void read_jobs(sj::array jobs) {
    for (auto job : jobs) read_job(job.value());
  }

 private:
  // What a job's attempts add up to, as read_philly_exact adds them.
  struct Span {
    int gpus = 0;
    double first_start = std::numeric_limits<double>::infinity(), last_end = -1;
  };

  static std::string_view string_of(sj::value v) {
    if (v.type() != sj::json_type::string) throw FastPathDeclines{};
    std::string_view s;
    if (v.get_string().get(s)) throw FastPathDeclines{};
    return s;
  }

  void read_job(sj::value job) {
    if (job.type() != sj::json_type::object) throw FastPathDeclines{};
    std::optional<std::string_view> id;
    std::optional<double> submitted;
    std::optional<Span> span;
    for_each_field(job, [&](std::string_view key, sj::value v) {
      if (key == "jobid") {
        id = string_of(v);
      } else if (key == "submitted_time") {
        submitted = csv::parse_datetime(string_of(v));
        if (!submitted) throw FastPathDeclines{};
      } else if (key == "attempts") {
        span = read_attempts(v);
      } else {
        check_json_value(v, 2);
      }
    });
    if (!id || id->empty() || !submitted || !span) throw FastPathDeclines{};
    if (span->gpus == 0 || span->last_end <= span->first_start) {
      ++trace_.ignored_rows;
      return;
    }
    SimJob j;
    j.id = std::string(*id);
    j.submit_s = *submitted;
    j.gpus = span->gpus;
    j.duration_s = span->last_end - span->first_start;
    trace_.jobs.push_back(std::move(j));
  }

  Span read_attempts(sj::value attempts) {
    if (attempts.type() != sj::json_type::array) throw FastPathDeclines{};
    Span span;
    for (auto item : attempts.get_array()) {
      sj::value attempt = item.value();
      if (attempt.type() != sj::json_type::object) throw FastPathDeclines{};
      std::optional<double> start, end;
      int gpus = 0;
      for_each_field(attempt, [&](std::string_view key, sj::value v) {
        if (key == "start_time") {
          start = time_or_nothing(v);
        } else if (key == "end_time") {
          end = time_or_nothing(v);
        } else if (key == "detail") {
          gpus = detail_gpus(v);
        } else {
          check_json_value(v, 4);
        }
      });
      span.gpus = std::max(span.gpus, gpus);
      if (!start || !end) continue;  // an attempt that never started or never ended
      if (*end < *start) throw FastPathDeclines{};
      span.first_start = std::min(span.first_start, *start);
      span.last_end = std::max(span.last_end, *end);
    }
    return span;
  }

  // An attempt's time: a date string, or nothing for any other value (as the exact path).
  static std::optional<double> time_or_nothing(sj::value v) {
    if (v.type() != sj::json_type::string) {
      check_json_value(v, 5);
      return std::nullopt;
    }
    return csv::parse_datetime(string_of(v));
  }

  // The GPUs of an attempt's `detail`: the sizes of its machines' `gpus` arrays; anything
  // else in it counts nothing (as the exact path).
  static int detail_gpus(sj::value detail) {
    if (detail.type() != sj::json_type::array) {
      check_json_value(detail, 5);
      return 0;
    }
    int gpus = 0;
    for (auto item : detail.get_array()) {
      sj::value machine = item.value();
      if (machine.type() != sj::json_type::object) {
        check_json_value(machine, 6);
        continue;
      }
      for_each_field(machine, [&](std::string_view key, sj::value v) {
        if (key == "gpus" && v.type() == sj::json_type::array) {
          for (auto gpu : v.get_array()) {
            check_json_value(gpu.value(), 8);
            ++gpus;
          }
        } else {
          check_json_value(v, 7);
        }
      });
    }
    return gpus;
  }

  Trace& trace_;
};

}  // namespace

std::optional<Result<Trace>> read_philly_fast(std::string_view text, const std::string& file) {
  if (!json_fast_path::fast_path_may_read(text, '[', json_fast_path::ExactReader::kNlohmann)) return std::nullopt;
  Trace trace;
  trace.source = file;
  trace.format = "philly";
  try {
    simdjson::padded_string padded(text);
    sj::parser parser;
    sj::document doc = parser.iterate(padded);
    PhillyFastPath(trace).read_jobs(doc.get_array());
    // A location left after the array is text after it (a second document); at the end there is none.
    if (!doc.current_location().error()) return std::nullopt;
  } catch (const FastPathDeclines&) {
    return std::nullopt;
  } catch (const simdjson::simdjson_error&) {
    return std::nullopt;
  }
  return finish(std::move(trace), file);
}

Result<Trace> read_philly(std::string_view text, const std::string& file, const TraceReadOptions& options) {
  if (auto fast = read_philly_fast(text, file)) return std::move(*fast);
  return read_philly_exact(text, file, options);
}

Result<Trace> read_philly_exact(std::string_view text, const std::string& file, const TraceReadOptions& options) {
  Trace trace;
  trace.source = file;
  trace.format = "philly";
  // Strict: syntax errors, trailing content and repeated keys are errors with positions.
  TOPOSCHED_TRY(doc, parse_json_document(text, file));
  if (!doc.is_array()) return make_error(ErrorCode::kParse, "a Philly cluster_job_log is a JSON array of jobs, found another value", {file, 1, 1});
  std::size_t search_from = 0;
  OffsetLocator locator(text, file);
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const auto& job = doc[i];
    std::string id = job.is_object() && job.contains("jobid") && job["jobid"].is_string() ? job["jobid"].get<std::string>() : std::string();
    SourceLocation loc{file, 0, 0};
    if (!id.empty()) {
      std::size_t pos = text.find("\"" + id + "\"", search_from);
      if (pos != std::string_view::npos) {
        loc = locator.at(pos);
        search_from = pos;
      }
    }
    bool ignored = false;
    auto parse = [&]() -> Result<SimJob> {
      auto bad = [&](std::string msg) {
        return make_error(ErrorCode::kParse, fmt::format("job #{}{}: {}", i + 1, id.empty() ? "" : " (" + id + ")", msg), loc);
      };
      if (!job.is_object()) return bad("expected a JSON object");
      if (id.empty()) return bad("expected a string \"jobid\"");
      if (!job.contains("submitted_time") || !job["submitted_time"].is_string()) return bad("expected a string \"submitted_time\"");
      auto submitted = csv::parse_datetime(job["submitted_time"].get<std::string>());
      if (!submitted) return bad(fmt::format("submitted_time '{}' is not 'YYYY-MM-DD HH:MM:SS'", job["submitted_time"].get<std::string>()));
      if (!job.contains("attempts") || !job["attempts"].is_array()) return bad("expected an array \"attempts\"");
      SimJob j;
      j.id = id;
      j.submit_s = *submitted;
      double first_start = std::numeric_limits<double>::infinity(), last_end = -1;
      int gpus = 0;
      for (const auto& at : job["attempts"]) {
        if (!at.is_object()) return bad("an attempt is not a JSON object");
        auto time_of = [&](const char* key) -> std::optional<double> {
          if (!at.contains(key) || !at[key].is_string()) return std::nullopt;
          return csv::parse_datetime(at[key].get<std::string>());
        };
        auto s = time_of("start_time");
        auto e = time_of("end_time");
        int n = 0;
        if (at.contains("detail") && at["detail"].is_array())
          for (const auto& d : at["detail"])
            if (d.is_object() && d.contains("gpus") && d["gpus"].is_array()) n += static_cast<int>(d["gpus"].size());
        gpus = std::max(gpus, n);
        if (!s || !e) continue;  // an attempt that never started or never ended
        if (*e < *s) return bad("an attempt ends before it starts");
        first_start = std::min(first_start, *s);
        last_end = std::max(last_end, *e);
      }
      if (gpus == 0 || last_end <= first_start) ignored = true;
      j.gpus = std::max(gpus, 1);
      j.duration_s = ignored ? 1 : last_end - first_start;
      return j;
    };
    auto j = parse();
    if (!j) {
      if (auto ok = reject_row(trace, options, j.error()); !ok) return tl::unexpected(ok.error());
    } else if (ignored) {
      ++trace.ignored_rows;
    } else {
      trace.jobs.push_back(std::move(*j));
    }
  }
  return finish(std::move(trace), file);
}

// ---------------------------------------------------------------- Helios
Result<Trace> read_helios(std::string_view text, const std::string& file, const TraceReadOptions& options) {
  Trace trace;
  trace.source = file;
  trace.format = "helios";
  csv::Reader reader(text, file);
  auto header = reader.next();
  if (!header) return tl::unexpected(header.error());
  if (!*header) return make_error(ErrorCode::kParse, "empty Helios log: expected a header 'job_id,user,gpu_num,...'", {file, 1, 1});
  const csv::Record& h = **header;
  auto idx = csv::header_index(h);
  auto col = [&](const char* n) { auto it = idx.find(n); return it == idx.end() ? -1 : it->second; };
  int c_id = col("job_id"), c_gpu = col("gpu_num"), c_submit = col("submit_time"), c_start = col("start_time");
  int c_end = col("end_time"), c_dur = col("duration");
  if (c_id < 0 || c_gpu < 0 || c_submit < 0 || (c_dur < 0 && (c_start < 0 || c_end < 0)))
    return make_error(ErrorCode::kParse, "not a Helios cluster_log: the header needs job_id, gpu_num, submit_time and duration (or start_time and end_time)",
                      {file, h.line, 1});
  auto rows = csv::read_job_rows(reader, h, trace, options, [&](const csv::Record& r, bool& ignored) -> Result<SimJob> {
    SimJob j;
    j.id = std::string(field(r, c_id));
    if (j.id.empty()) return csv::field_error(file, r, c_id, "expected a job_id, found an empty field");
    auto g = csv::to_int(file, r, c_gpu, "gpu_num");
    if (!g) return tl::unexpected(g.error());
    if (*g < 0 || *g > 10'000'000) return csv::field_error(file, r, c_gpu, fmt::format("gpu_num must be >= 0, found {}", *g));
    auto sub = csv::parse_datetime(field(r, c_submit));
    if (!sub) return csv::field_error(file, r, c_submit, fmt::format("expected submit_time as 'YYYY-MM-DD HH:MM:SS', found '{}'", field(r, c_submit)));
    j.submit_s = *sub;
    double dur = 0;
    if (c_dur >= 0 && !field(r, c_dur).empty()) {
      auto d = csv::to_double(file, r, c_dur, "duration");
      if (!d) return tl::unexpected(d.error());
      if (*d < 0) return csv::field_error(file, r, c_dur, fmt::format("duration must be >= 0, found {}", *d));
      dur = *d;
    } else if (c_start >= 0 && c_end >= 0) {
      auto s = csv::parse_datetime(field(r, c_start));
      auto e = csv::parse_datetime(field(r, c_end));
      if (s && e) dur = *e - *s;
    }
    j.gpus = static_cast<int>(std::max<long long>(*g, 1));
    j.duration_s = dur > 0 ? dur : 1;
    if (*g == 0 || dur <= 0) ignored = true;
    return j;
  });
  if (!rows) return tl::unexpected(rows.error());
  return finish(std::move(trace), file);
}

}  // namespace toposched::sim
