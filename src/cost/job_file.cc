#include "cost/job_file.h"

#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "cost/selection.h"
#include "topology/file_io.h"
#include "topology/yaml_document.h"

namespace toposched {

namespace {

// Positions and messages for one input file.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  Result<YAML::Node> parse(std::string_view text) const { return load_yaml_document(text, file_); }

  SourceLocation where(const YAML::Node& n) const {
    YAML::Mark m = n.Mark();
    if (m.is_null() || m.line < 0) return {file_, 0, 0};
    return {file_, m.line + 1, m.column + 1};
  }

  tl::unexpected<Error> fail(const YAML::Node& n, std::string message) const {
    return make_error(ErrorCode::kParse, std::move(message), where(n));
  }

  static std::string describe(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Null:
        return "nothing (null)";
      case YAML::NodeType::Scalar: {
        std::string s = n.Scalar();
        if (s.size() > 40) s = s.substr(0, 37) + "...";
        return fmt::format("'{}'", s);
      }
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Map:
        return "a mapping";
      default:
        return "nothing";
    }
  }

  Result<void> keys(const YAML::Node& map, std::string_view what,
                    const std::set<std::string, std::less<>>& allowed) const {
    if (!map.IsMap()) return fail(map, fmt::format("expected {} to be a mapping, found {}", what, describe(map)));
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
      if (!allowed.contains(key)) {
        std::string list;
        for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
        return fail(it->first, fmt::format("unknown key '{}' in {}; expected one of: {}", key, what, list));
      }
    }
    return {};
  }

  Result<double> number(const YAML::Node& n, std::string_view key, double lo, double hi) const {
    double v = 0;
    bool ok = n.IsScalar();
    if (ok) {
      const std::string& s = n.Scalar();
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      ok = !s.empty() && ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(v);
    }
    if (!ok) return fail(n, fmt::format("expected '{}' to be a number, found {}", key, describe(n)));
    if (v < lo || v > hi) return fail(n, fmt::format("expected '{}' in {}..{}, found {}", key, lo, hi, n.Scalar()));
    return v;
  }

  Result<int> integer(const YAML::Node& n, std::string_view key, int lo, int hi) const {
    auto v = number(n, key, lo, hi);
    if (!v) return tl::unexpected(v.error());
    if (*v != std::floor(*v))
      return fail(n, fmt::format("expected '{}' to be a whole number, found {}", key, n.Scalar()));
    return static_cast<int>(*v);
  }

  Result<std::string> string(const YAML::Node& n, std::string_view key) const {
    if (!n.IsScalar()) return fail(n, fmt::format("expected '{}' to be a string, found {}", key, describe(n)));
    return n.Scalar();
  }

  Result<bool> boolean(const YAML::Node& n, std::string_view key) const {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      if (s == "true" || s == "True" || s == "yes") return true;
      if (s == "false" || s == "False" || s == "no") return false;
    }
    return fail(n, fmt::format("expected '{}' to be true or false, found {}", key, describe(n)));
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// long: the job file's schema read key by key, in the order docs/cost-model.md lists it
Result<JobSpec> parse_job(const Reader& in, const YAML::Node& root) {
  if (auto k = in.keys(root, "the job file", {"name", "plan", "workload", "model"}); !k)
    return tl::unexpected(k.error());
  JobSpec job;
  if (root["name"]) {
    auto s = in.string(root["name"], "name");
    if (!s) return tl::unexpected(s.error());
    job.name = *s;
  }
  if (!root["plan"])
    return in.fail(root, "the job file needs a 'plan' mapping with tp, pp, dp, ep, cp (each default 1)");
  const YAML::Node plan = root["plan"];
  if (auto k = in.keys(plan, "'plan'", {"tp", "pp", "dp", "ep", "cp", "order"}); !k) return tl::unexpected(k.error());
  int* fields[] = {&job.plan.tp, &job.plan.pp, &job.plan.dp, &job.plan.ep, &job.plan.cp};
  const char* names[] = {"tp", "pp", "dp", "ep", "cp"};
  for (int i = 0; i < 5; ++i)
    if (plan[names[i]]) {
      auto v = in.integer(plan[names[i]], names[i], 1, 1'000'000);
      if (!v) return tl::unexpected(v.error());
      *fields[i] = *v;
    }
  if (plan["order"]) {
    auto s = in.string(plan["order"], "order");
    if (!s) return tl::unexpected(s.error());
    job.plan.order = *s;
  }
  if (auto v = validate_plan(job.plan); !v) return in.fail(plan, v.error().message);

  std::string cls = "llm-dense";
  if (root["workload"]) {
    auto s = in.string(root["workload"], "workload");
    if (!s) return tl::unexpected(s.error());
    cls = *s;
  }
  auto base = workload_class(cls);
  if (!base) return in.fail(root["workload"] ? root["workload"] : root, base.error().message);
  job.model = *base;
  if (root["model"]) {
    const YAML::Node m = root["model"];
    if (auto k =
            in.keys(m, "'model'",
                    {"parameters", "hidden", "layers", "sequence", "micro_batch", "micro_batches", "bytes_per_element",
                     "grad_bytes_per_element", "experts", "top_k", "expert_parameter_fraction", "moe_layer_interval",
                     "training", "overlap", "compute_ms_per_step"});
        !k)
      return tl::unexpected(k.error());
    WorkloadModel& w = job.model;
    struct IntField {
      const char* key;
      int* field;
      int lo;
      int hi;
    };
    IntField ints[] = {{"hidden", &w.hidden, 0, 1 << 24},
                       {"layers", &w.layers, 0, 100000},
                       {"sequence", &w.sequence, 0, 1 << 30},
                       {"micro_batch", &w.micro_batch, 1, 1 << 20},
                       {"micro_batches", &w.micro_batches, 1, 1 << 20},
                       {"experts", &w.experts, 0, 1 << 20},
                       {"top_k", &w.top_k, 1, 1 << 20},
                       {"moe_layer_interval", &w.moe_layer_interval, 1, 100000}};
    for (const auto& f : ints)
      if (m[f.key]) {
        auto v = in.integer(m[f.key], f.key, f.lo, f.hi);
        if (!v) return tl::unexpected(v.error());
        *f.field = *v;
      }
    struct NumField {
      const char* key;
      double* field;
      double lo;
      double hi;
      double scale;
    };
    double compute_ms = w.compute_us_per_step / 1e3;
    NumField nums[] = {{"parameters", &w.parameters, 0, 1e16, 1},
                       {"bytes_per_element", &w.bytes_per_element, 0.125, 16, 1},
                       {"grad_bytes_per_element", &w.grad_bytes_per_element, 0.125, 16, 1},
                       {"expert_parameter_fraction", &w.expert_parameter_fraction, 0, 1, 1},
                       {"overlap", &w.overlap, 0, 0.999, 1},
                       {"compute_ms_per_step", &compute_ms, 0, 1e9, 1}};
    for (const auto& f : nums)
      if (m[f.key]) {
        auto v = in.number(m[f.key], f.key, f.lo, f.hi);
        if (!v) return tl::unexpected(v.error());
        *f.field = *v * f.scale;
      }
    w.compute_us_per_step = compute_ms * 1e3;
    if (m["training"]) {
      auto b = in.boolean(m["training"], "training");
      if (!b) return tl::unexpected(b.error());
      w.training = *b;
    }
    if (auto v = validate_workload(w); !v) return in.fail(m, v.error().message);
  }
  if (job.name.empty()) job.name = job.model.name;
  return job;
}

Result<std::vector<GpuId>> parse_placement(const Reader& in, const Cluster& cluster, const YAML::Node& root) {
  if (!root.IsMap() || !root["gpus"])
    return in.fail(root, fmt::format("expected a mapping with 'gpus' (a GPU selection, or a list of NODE:INDEX or "
                                     "{{node, gpu, rank}}), found {}",
                                     Reader::describe(root)));
  const YAML::Node gpus = root["gpus"];
  if (gpus.IsScalar()) {
    auto sel = parse_gpu_selection(cluster, gpus.Scalar());
    if (!sel) return in.fail(gpus, sel.error().message);
    return *sel;
  }
  if (!gpus.IsSequence() || gpus.size() == 0)
    return in.fail(gpus, fmt::format("expected 'gpus' to be a GPU selection or a non-empty list, found {}",
                                     Reader::describe(gpus)));
  std::vector<GpuId> out(gpus.size());
  std::vector<bool> filled(gpus.size(), false);
  bool ranked = false, unranked = false;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const YAML::Node item = gpus[i];
    GpuId g;
    std::size_t rank = i;
    if (item.IsScalar()) {
      auto sel = parse_gpu_selection(cluster, item.Scalar());
      if (!sel) return in.fail(item, sel.error().message);
      if (sel->size() != 1)
        return in.fail(item, fmt::format("expected one GPU (NODE:INDEX) per list entry, found '{}'", item.Scalar()));
      g = (*sel)[0];
      unranked = true;
    } else if (item.IsMap()) {
      if (!item["node"] || !item["gpu"])
        return in.fail(item, "expected a GPU entry with 'node' and 'gpu' (and optionally 'rank')");
      auto node = in.string(item["node"], "node");
      if (!node) return tl::unexpected(node.error());
      auto n = cluster.find_node(*node);
      if (!n) return in.fail(item["node"], fmt::format("no node named '{}' in cluster '{}'", *node, cluster.name()));
      auto idx = in.integer(item["gpu"], "gpu", 0, cluster.node_gpu_count(*n) - 1);
      if (!idx) return tl::unexpected(idx.error());
      g = cluster.node_gpu(*n, *idx);
      if (item["rank"]) {
        auto r = in.integer(item["rank"], "rank", 0, static_cast<int>(gpus.size()) - 1);
        if (!r) return tl::unexpected(r.error());
        rank = static_cast<std::size_t>(*r);
        ranked = true;
      } else {
        unranked = true;
      }
    } else {
      return in.fail(item, fmt::format("expected NODE:INDEX or {{node, gpu, rank}}, found {}", Reader::describe(item)));
    }
    if (ranked && unranked) return in.fail(item, "either every GPU entry has a 'rank' or none has");
    if (filled[rank]) return in.fail(item, fmt::format("rank {} is given twice", rank));
    filled[rank] = true;
    out[rank] = g;
  }
  std::vector<GpuId> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] == sorted[i - 1])
      return in.fail(gpus, fmt::format("GPU {} is placed twice", gpu_label(cluster, sorted[i])));
  return out;
}

}  // namespace

Result<JobSpec> parse_job_text(std::string_view text, const std::string& file) {
  Reader in(file);
  auto root = in.parse(text);
  if (!root) return tl::unexpected(root.error());
  try {
    return parse_job(in, *root);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      SourceLocation{file, e.mark.line + 1, e.mark.column + 1});
  }
}

Result<JobSpec> read_job_file(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return tl::unexpected(text.error());
  return parse_job_text(*text, path);
}

Result<std::vector<GpuId>> parse_placement_text(const Cluster& cluster, std::string_view text,
                                                const std::string& file) {
  Reader in(file);
  auto root = in.parse(text);
  if (!root) return tl::unexpected(root.error());
  try {
    return parse_placement(in, cluster, *root);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      SourceLocation{file, e.mark.line + 1, e.mark.column + 1});
  }
}

Result<std::vector<GpuId>> read_placement_file(const Cluster& cluster, const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return tl::unexpected(text.error());
  return parse_placement_text(cluster, *text, path);
}

}  // namespace toposched
