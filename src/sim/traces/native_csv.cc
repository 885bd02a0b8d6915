#include "sim/traces/native_csv.h"

#include <array>

#include <fmt/format.h>

#include "sim/traces/csv.h"

namespace toposched::sim {

namespace {
constexpr std::array<std::string_view, 12> kColumns = {"id", "submit_s", "gpus", "duration_s", "tp", "pp",
                                                       "dp", "ep", "gpu_model", "kind", "priority", "estimate_s"};
constexpr std::array<std::string_view, 4> kKinds = {"llm-dense", "llm-moe", "dp-vision", "inference"};
}  // namespace

// long: the header's column map, then twelve optional columns read and checked in place per row
Result<Trace> read_native_csv(std::string_view text, const std::string& file, const TraceReadOptions& options) {
  Trace trace;
  trace.source = file;
  trace.format = "native";
  csv::Reader reader(text, file);
  auto header = reader.next();
  if (!header) return tl::unexpected(header.error());
  if (!*header) return make_error(ErrorCode::kParse, "empty trace: expected a header 'id,submit_s,gpus,duration_s,...'", {file, 1, 1});
  std::array<int, kColumns.size()> col;
  col.fill(-1);
  const csv::Record& h = **header;
  for (std::size_t i = 0; i < h.fields.size(); ++i) {
    std::string_view name = trim(h.fields[i]);
    bool known = false;
    for (std::size_t k = 0; k < kColumns.size(); ++k)
      if (name == kColumns[k]) {
        if (col[k] >= 0) return csv::field_error(file, h, static_cast<int>(i), fmt::format("column '{}' appears twice", name));
        col[k] = static_cast<int>(i);
        known = true;
      }
    if (!known)
      return csv::field_error(file, h, static_cast<int>(i),
                              fmt::format("unknown column '{}'; expected id,submit_s,gpus,duration_s and optionally "
                                          "tp,pp,dp,ep,gpu_model,kind,priority,estimate_s", name));
  }
  for (std::size_t k = 0; k < 4; ++k)
    if (col[k] < 0)
      return make_error(ErrorCode::kParse, fmt::format("header lacks the required column '{}' (required: id,submit_s,gpus,duration_s)", kColumns[k]),
                        {file, h.line, 1});

  auto rows = csv::read_job_rows(reader, h, trace, options, [&](const csv::Record& r, bool& ignored) -> Result<SimJob> {
    (void)ignored;  // every well-formed row is a job that ran
    SimJob j;
    j.id = std::string(trim(r.fields[static_cast<std::size_t>(col[0])]));
    if (j.id.empty()) return csv::field_error(file, r, col[0], "expected a job id, found an empty field");
    auto submit = csv::to_double(file, r, col[1], "submit_s");
    if (!submit) return tl::unexpected(submit.error());
    if (*submit < 0 || *submit > kMaxTraceSeconds)
      return csv::field_error(file, r, col[1], fmt::format("submit_s must be in 0..{:g}, found {}", kMaxTraceSeconds, *submit));
    j.submit_s = *submit;
    auto gpus = csv::to_int(file, r, col[2], "gpus");
    if (!gpus) return tl::unexpected(gpus.error());
    if (*gpus < 1 || *gpus > 10'000'000) return csv::field_error(file, r, col[2], fmt::format("gpus must be in 1..10000000, found {}", *gpus));
    j.gpus = static_cast<int>(*gpus);
    auto dur = csv::to_double(file, r, col[3], "duration_s");
    if (!dur) return tl::unexpected(dur.error());
    if (*dur <= 0 || *dur > kMaxTraceSeconds)
      return csv::field_error(file, r, col[3], fmt::format("duration_s must be > 0 and <= {:g}, found {}", kMaxTraceSeconds, *dur));
    j.duration_s = *dur;
    int* dims[4] = {&j.tp, &j.pp, &j.dp, &j.ep};
    for (std::size_t k = 4; k < 8; ++k) {
      if (col[k] < 0 || trim(r.fields[static_cast<std::size_t>(col[k])]).empty()) continue;
      auto v = csv::to_int(file, r, col[k], kColumns[k]);
      if (!v) return tl::unexpected(v.error());
      if (*v < 1 || *v > 1'000'000) return csv::field_error(file, r, col[k], fmt::format("{} must be >= 1, found {}", kColumns[k], *v));
      *dims[k - 4] = static_cast<int>(*v);
    }
    if (j.tp > 0 || j.pp > 0 || j.dp > 0) {
      long long prod = static_cast<long long>(std::max(j.tp, 1)) * std::max(j.pp, 1) * std::max(j.dp, 1);
      if (prod != j.gpus)
        return csv::field_error(file, r, col[4] >= 0 ? col[4] : col[2],
                                fmt::format("tp x pp x dp = {} but the job asks for {} GPUs", prod, j.gpus));
    }
    if (col[8] >= 0) j.gpu_model = std::string(trim(r.fields[static_cast<std::size_t>(col[8])]));
    if (col[9] >= 0) {
      j.kind = std::string(trim(r.fields[static_cast<std::size_t>(col[9])]));
      if (!j.kind.empty() && std::find(kKinds.begin(), kKinds.end(), j.kind) == kKinds.end())
        return csv::field_error(file, r, col[9], fmt::format("kind must be llm-dense, llm-moe, dp-vision or inference, found '{}'", j.kind));
    }
    if (col[10] >= 0 && !trim(r.fields[static_cast<std::size_t>(col[10])]).empty()) {
      auto v = csv::to_int(file, r, col[10], "priority");
      if (!v) return tl::unexpected(v.error());
      if (*v < -1'000'000 || *v > 1'000'000) return csv::field_error(file, r, col[10], "priority must be in -1000000..1000000");
      j.priority = static_cast<int>(*v);
    }
    if (col[11] >= 0 && !trim(r.fields[static_cast<std::size_t>(col[11])]).empty()) {
      auto v = csv::to_double(file, r, col[11], "estimate_s");
      if (!v) return tl::unexpected(v.error());
      if (*v <= 0 || *v > kMaxTraceSeconds)
        return csv::field_error(file, r, col[11], fmt::format("estimate_s must be > 0 and <= {:g}, found {}", kMaxTraceSeconds, *v));
      j.estimate_s = *v;
    }
    return j;
  });
  if (!rows) return tl::unexpected(rows.error());
  if (auto ok = finalize_trace(trace); !ok) {
    Error e = ok.error();
    e.where.file = file;
    return tl::unexpected(e);
  }
  return trace;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos && !s.starts_with('#')) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string write_native_csv(const Trace& trace) {
  std::string out = "id,submit_s,gpus,duration_s,tp,pp,dp,ep,gpu_model,kind,priority,estimate_s\n";
  auto dim = [](int v) { return v > 0 ? std::to_string(v) : std::string(); };
  for (const SimJob& j : trace.jobs) {
    out += fmt::format("{},{:.3f},{},{:.3f},{},{},{},{},{},{},{},{}\n", csv_field(j.id), j.submit_s, j.gpus, j.duration_s, dim(j.tp),
                       dim(j.pp), dim(j.dp), dim(j.ep), csv_field(j.gpu_model), j.kind, j.priority,
                       j.estimate_s > 0 ? fmt::format("{:.3f}", j.estimate_s) : std::string());
  }
  return out;
}

}  // namespace toposched::sim
