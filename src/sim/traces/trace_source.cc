#include "sim/traces/trace_source.h"

#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "formats/cluster_source.h"
#include "sim/traces/alibaba_v2023.h"
#include "sim/traces/csv.h"
#include "sim/traces/native_csv.h"
#include "sim/traces/other_traces.h"
#include "topology/file_io.h"

namespace toposched::sim {

namespace {

namespace fs = std::filesystem;

// A PAI v2020 task table, with the job table beside it when there is one.
Result<Trace> read_pai_files(std::string_view text, const std::string& file, const TraceReadOptions& options) {
  std::error_code ec;
  std::optional<TextFile> jobs;
  std::string job_file = (fs::path(file).parent_path() / "pai_job_table.csv").string();
  std::string job_text;
  if (fs::path(file).filename() == "pai_task_table.csv" && fs::exists(job_file, ec)) {
    auto jt = read_text_file(job_file);
    if (!jt) return tl::unexpected(jt.error());
    job_text = std::move(*jt);
    jobs = TextFile{job_text, job_file};
  }
  return read_pai_v2020(TextFile{text, file}, jobs, options);
}

}  // namespace

const Registry<TraceReader>& trace_readers() {
  static const Registry<TraceReader> kReaders(
      "trace format", {{"auto", "detected from the header or content (detect_trace_format)", nullptr},
                       {"native", "toposched's own CSV", read_native_csv},
                       {"alibaba-v2023", "Alibaba cluster-trace-gpu-v2023 (OpenB) pods", read_alibaba_v2023_pods},
                       {"pai-v2020", "Alibaba PAI cluster-trace-gpu-v2020 task table (and job table)", read_pai_files},
                       {"philly", "Microsoft Philly cluster_job_log", read_philly},
                       {"helios", "SenseTime HeliosData cluster_log.csv", read_helios}});
  return kReaders;
}

const std::vector<std::string>& trace_formats() {
  static const std::vector<std::string> kFormats = trace_readers().names();
  return kFormats;
}

std::string detect_trace_format(std::string_view text, const std::string& file) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i < text.size() && text[i] == '[') return "philly";
  // The first line that is not blank or a '#' comment.
  std::string_view first;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    std::string_view ln = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    std::string_view t = trim(ln);
    if (!t.empty() && t[0] != '#') {
      first = t;
      break;
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  std::string base = std::filesystem::path(file).filename().string();
  if (base.starts_with("pai_task_table")) return "pai-v2020";
  auto has = [&](std::string_view col) {
    std::size_t p = 0;
    while ((p = first.find(col, p)) != std::string_view::npos) {
      bool left = p == 0 || first[p - 1] == ',';
      std::size_t end = p + col.size();
      bool right = end >= first.size() || first[end] == ',' || first[end] == '\r';
      if (left && right) return true;
      p = end;
    }
    return false;
  };
  if (has("submit_s") && has("duration_s")) return "native";
  if (has("num_gpu") && has("name")) return "alibaba-v2023";
  if (has("gpu_num") && has("job_id")) return "helios";
  if (has("job_name") && has("plan_gpu")) return "pai-v2020";
  return "";
}

Result<Trace> load_trace(const std::string& path, std::string_view format, const TraceReadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string file = path;
  bool dir = fs::is_directory(path, ec);
  if (dir) {
    if (format != "auto" && format != "pai-v2020")
      return make_error(ErrorCode::kInvalidArgument, fmt::format("--trace {} is a directory; only a PAI v2020 trace is read from a directory", path));
    file = (fs::path(path) / "pai_task_table.csv").string();
    if (!fs::exists(file, ec))
      return make_error(ErrorCode::kNotFound, fmt::format("{} is a directory without pai_task_table.csv", path));
    format = "pai-v2020";
  }
  auto text = read_text_file(file);
  if (!text) return tl::unexpected(text.error());
  std::string fmt_name(format);
  if (fmt_name == "auto") {
    fmt_name = detect_trace_format(*text, file);
    if (fmt_name.empty())
      return make_error(ErrorCode::kParse,
                        "cannot tell the trace format from the first line; pass --trace-format "
                        "native|alibaba-v2023|pai-v2020|philly|helios (see docs/traces.md)",
                        {file, 1, 1});
  }
  TOPOSCHED_TRY(read, trace_readers().find(fmt_name));
  return read(*text, file, options);
}

Result<Cluster> load_sim_cluster(const std::string& spec) {
  std::error_code ec;
  if (!spec.starts_with("preset:") && std::filesystem::is_regular_file(spec, ec)) {
    auto text = read_text_file(spec);
    if (!text) return tl::unexpected(text.error());
    std::string_view t = *text;
    if (t.starts_with("\xEF\xBB\xBF")) t.remove_prefix(3);
    if (t.starts_with("sn,")) return read_alibaba_v2023_nodes(t, spec);
  }
  return load_cluster(spec);
}

}  // namespace toposched::sim
