#include "cost/job_file.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "cost/selection.h"
#include "topology/file_io.h"
#include "topology/yaml_document.h"
#include "topology/yaml_input.h"

namespace toposched {

namespace {

// The job file's `plan` mapping into job.plan.
Result<void> parse_plan(const YamlInput& in, const YAML::Node& root, JobSpec& job) {
  if (!root["plan"])
    return in.error_at(root, "the job file needs a 'plan' mapping with tp, pp, dp, ep, cp (each default 1)");
  const YAML::Node plan = root["plan"];
  if (auto k = in.expect_map(plan, "'plan'", {"tp", "pp", "dp", "ep", "cp", "order"}); !k) return tl::unexpected(k.error());
  int* fields[] = {&job.plan.tp, &job.plan.pp, &job.plan.dp, &job.plan.ep, &job.plan.cp};
  const char* names[] = {"tp", "pp", "dp", "ep", "cp"};
  for (int i = 0; i < 5; ++i)
    if (plan[names[i]]) {
      auto v = in.whole_number(plan[names[i]], names[i], 1, 1'000'000);
      if (!v) return tl::unexpected(v.error());
      *fields[i] = *v;
    }
  if (plan["order"]) {
    auto s = in.string(plan["order"], "order");
    if (!s) return tl::unexpected(s.error());
    job.plan.order = *s;
  }
  if (auto v = validate_plan(job.plan); !v) return in.error_at(plan, v.error().message);
  return {};
}

// `replica_batch`: sequences per step and data-parallel replica (the global batch over dp).
// With `micro_batch` it fixes the number of micro-batches; without it the micro-batch size is
// left to with_default_micro_batch (cost/compute.h), which needs the GPU and the plan.
Result<void> parse_replica_batch(const YamlInput& in, const YAML::Node& m, WorkloadModel& w) {
  auto batch = in.whole_number(m["replica_batch"], "replica_batch", 1, 1 << 24);
  if (!batch) return tl::unexpected(batch.error());
  if (m["micro_batches"])
    return in.error_at(m["micro_batches"], "give either micro_batches or replica_batch (= micro_batch x micro_batches), not both");
  if (!m["micro_batch"]) {
    w.micro_batch = 1;
    w.micro_batches = *batch;
    w.default_micro_batch = true;
    return {};
  }
  if (*batch % w.micro_batch != 0)
    return in.error_at(m["replica_batch"], fmt::format("replica_batch {} is not a multiple of micro_batch {}", *batch, w.micro_batch));
  w.micro_batches = *batch / w.micro_batch;
  return {};
}

// The model's `precision` and `recompute` choices, and the gradient size DP reduces that
// follows the precision unless the file gives it.
Result<void> parse_precision_and_recompute(const YamlInput& in, const YAML::Node& m, WorkloadModel& w) {
  if (m["precision"]) {
    auto p = in.choice(m["precision"], "precision", {"bf16", "fp16", "fp8", "fp32"});
    if (!p) return tl::unexpected(p.error());
    w.precision = std::array{Precision::kBf16, Precision::kFp16, Precision::kFp8, Precision::kFp32}[*p];
    // DP reduces the gradients in the precision Megatron-LM keeps them in, as the compute
    // model writes them (compute.cc, gemm_bytes): fp32 main gradients with bf16 (arguments.py
    // forces accumulate_allreduce_grads_in_fp32), FP8 (bf16 parameters) and fp32; the model's
    // own fp16 gradients with fp16, where that flag defaults off. Classes that keep fp32
    // weights under AMP (dp-vision, recommendation) are not Megatron's and keep their own.
    if (!m["grad_bytes_per_element"] && w.family == ModelFamily::kTransformer)
      w.grad_bytes_per_element = w.precision == Precision::kFp16 ? 2 : 4;
  }
  if (m["recompute"]) {
    auto r = in.choice(m["recompute"], "recompute", {"none", "selective", "full"});
    if (!r) return tl::unexpected(r.error());
    w.recompute = std::array{Recompute::kNone, Recompute::kSelective, Recompute::kFull}[*r];
  }
  return {};
}

// The job file's `model` mapping over the workload class's model `w`.
// long: one table per kind of field (integers, numbers, booleans), each read in one loop
Result<void> parse_model(const YamlInput& in, const YAML::Node& root, WorkloadModel& w) {
  const YAML::Node m = root["model"];
  if (auto k =
          in.expect_map(m, "'model'",
                  {"parameters", "hidden", "layers", "heads", "kv_heads", "ffn_hidden", "gated_mlp", "vocabulary",
                   "sequence", "micro_batch", "micro_batches", "replica_batch", "virtual_stages", "precision", "recompute",
                   "sequence_parallel", "flash_attention", "distributed_optimizer", "bytes_per_element", "grad_bytes_per_element", "experts",
                   "top_k", "expert_parameter_fraction", "moe_layer_interval", "training", "overlap", "tp_overlap",
                   "forward_gflops_per_sample", "embedding_bytes_per_sample", "activation_bytes_per_sample",
                   "compute_ms_per_step"});
      !k)
    return tl::unexpected(k.error());
  // A model of its own shape (hidden or layers given) does not inherit the class's
  // architecture details: heads, KV heads, FFN size, gating and vocabulary start unset
  // (heads = hidden / 128, FFN = 4 x hidden, no logits) unless given too.
  if (m["hidden"] || m["layers"]) {
    w.heads = w.kv_heads = w.ffn_hidden = w.vocabulary = 0;
    w.gated_mlp = false;
  }
  struct IntField {
    const char* key;
    int* field;
    int lo;
    int hi;
  };
  IntField ints[] = {{"hidden", &w.hidden, 0, 1 << 24},
                     {"layers", &w.layers, 0, 100000},
                     {"heads", &w.heads, 0, 1 << 20},
                     {"kv_heads", &w.kv_heads, 0, 1 << 20},
                     {"ffn_hidden", &w.ffn_hidden, 0, 1 << 26},
                     {"vocabulary", &w.vocabulary, 0, 1 << 26},
                     {"virtual_stages", &w.virtual_stages, 1, 1024},
                     {"sequence", &w.sequence, 0, 1 << 30},
                     {"micro_batch", &w.micro_batch, 1, 1 << 20},
                     {"micro_batches", &w.micro_batches, 1, 1 << 20},
                     {"experts", &w.experts, 0, 1 << 20},
                     {"top_k", &w.top_k, 1, 1 << 20},
                     {"moe_layer_interval", &w.moe_layer_interval, 1, 100000}};
  for (const auto& f : ints)
    if (m[f.key]) {
      auto v = in.whole_number(m[f.key], f.key, f.lo, f.hi);
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
                     {"tp_overlap", &w.tp_overlap, 0, 0.999, 1},
                     {"forward_gflops_per_sample", &w.forward_gflops_per_sample, 0, 1e9, 1},
                     {"embedding_bytes_per_sample", &w.embedding_bytes_per_sample, 0, 1e12, 1},
                     {"activation_bytes_per_sample", &w.activation_bytes_per_sample, 0, 1e12, 1},
                     {"compute_ms_per_step", &compute_ms, 0, 1e9, 1}};
  for (const auto& f : nums)
    if (m[f.key]) {
      auto v = in.number(m[f.key], f.key, f.lo, f.hi);
      if (!v) return tl::unexpected(v.error());
      *f.field = *v * f.scale;
    }
  w.compute_us_per_step = compute_ms * 1e3;
  struct BoolField {
    const char* key;
    bool* field;
  };
  BoolField bools[] = {{"training", &w.training},
                       {"gated_mlp", &w.gated_mlp},
                       {"sequence_parallel", &w.sequence_parallel},
                       {"flash_attention", &w.flash_attention},
                       {"distributed_optimizer", &w.distributed_optimizer}};
  for (const auto& f : bools)
    if (m[f.key]) {
      auto b = in.boolean(m[f.key], f.key);
      if (!b) return tl::unexpected(b.error());
      *f.field = *b;
    }
  if (auto c = parse_precision_and_recompute(in, m, w); !c) return tl::unexpected(c.error());
  if (m["replica_batch"]) {
    if (auto b = parse_replica_batch(in, m, w); !b) return tl::unexpected(b.error());
  }
  if (auto v = validate_workload(w); !v) return in.error_at(m, v.error().message);
  return {};
}

Result<JobSpec> parse_job(const YamlInput& in, const YAML::Node& root) {
  if (auto k = in.expect_map(root, "the job file", {"name", "plan", "workload", "model"}); !k)
    return tl::unexpected(k.error());
  JobSpec job;
  if (root["name"]) {
    auto s = in.string(root["name"], "name");
    if (!s) return tl::unexpected(s.error());
    job.name = *s;
  }
  if (auto p = parse_plan(in, root, job); !p) return tl::unexpected(p.error());
  std::string cls = "llm-dense";
  if (root["workload"]) {
    auto s = in.string(root["workload"], "workload");
    if (!s) return tl::unexpected(s.error());
    cls = *s;
  }
  auto base = workload_class(cls);
  if (!base) return in.error_at(root["workload"] ? root["workload"] : root, base.error().message);
  job.model = *base;
  if (root["model"]) {
    if (auto m = parse_model(in, root, job.model); !m) return tl::unexpected(m.error());
  }
  if (job.name.empty()) job.name = job.model.name;
  return job;
}

Result<std::vector<GpuId>> parse_placement(const YamlInput& in, const Cluster& cluster, const YAML::Node& root) {
  if (!root.IsMap() || !root["gpus"])
    return in.error_at(root, fmt::format("expected a mapping with 'gpus' (a GPU selection, or a list of NODE:INDEX or "
                                     "{{node, gpu, rank}}), found {}",
                                     YamlInput::describe(root)));
  const YAML::Node gpus = root["gpus"];
  if (gpus.IsScalar()) {
    auto sel = parse_gpu_selection(cluster, gpus.Scalar());
    if (!sel) return in.error_at(gpus, sel.error().message);
    return *sel;
  }
  if (!gpus.IsSequence() || gpus.size() == 0)
    return in.error_at(gpus, fmt::format("expected 'gpus' to be a GPU selection or a non-empty list, found {}",
                                     YamlInput::describe(gpus)));
  std::vector<GpuId> out(gpus.size());
  std::vector<bool> filled(gpus.size(), false);
  bool ranked = false, unranked = false;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const YAML::Node item = gpus[i];
    GpuId g;
    std::size_t rank = i;
    if (item.IsScalar()) {
      auto sel = parse_gpu_selection(cluster, item.Scalar());
      if (!sel) return in.error_at(item, sel.error().message);
      if (sel->size() != 1)
        return in.error_at(item, fmt::format("expected one GPU (NODE:INDEX) per list entry, found '{}'", item.Scalar()));
      g = (*sel)[0];
      unranked = true;
    } else if (item.IsMap()) {
      if (!item["node"] || !item["gpu"])
        return in.error_at(item, "expected a GPU entry with 'node' and 'gpu' (and optionally 'rank')");
      auto node = in.string(item["node"], "node");
      if (!node) return tl::unexpected(node.error());
      auto n = cluster.find_node(*node);
      if (!n) return in.error_at(item["node"], fmt::format("no node named '{}' in cluster '{}'", *node, cluster.name()));
      auto idx = in.whole_number(item["gpu"], "gpu", 0, cluster.node_gpu_count(*n) - 1);
      if (!idx) return tl::unexpected(idx.error());
      g = cluster.node_gpu(*n, *idx);
      if (item["rank"]) {
        auto r = in.whole_number(item["rank"], "rank", 0, static_cast<int>(gpus.size()) - 1);
        if (!r) return tl::unexpected(r.error());
        rank = static_cast<std::size_t>(*r);
        ranked = true;
      } else {
        unranked = true;
      }
    } else {
      return in.error_at(item, fmt::format("expected NODE:INDEX or {{node, gpu, rank}}, found {}", YamlInput::describe(item)));
    }
    if (ranked && unranked) return in.error_at(item, "either every GPU entry has a 'rank' or none has");
    if (filled[rank]) return in.error_at(item, fmt::format("rank {} is given twice", rank));
    filled[rank] = true;
    out[rank] = g;
  }
  std::vector<GpuId> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] == sorted[i - 1])
      return in.error_at(gpus, fmt::format("GPU {} is placed twice", gpu_label(cluster, sorted[i])));
  return out;
}

}  // namespace

Result<JobSpec> parse_job_text(std::string_view text, const std::string& file) {
  YamlInput in(file);
  auto root = in.parse(text);
  if (!root) return tl::unexpected(root.error());
  try {
    return parse_job(in, *root);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}

Result<JobSpec> read_job_file(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return tl::unexpected(text.error());
  return parse_job_text(*text, path);
}

Result<std::vector<GpuId>> parse_placement_text(const Cluster& cluster, std::string_view text,
                                                const std::string& file) {
  YamlInput in(file);
  auto root = in.parse(text);
  if (!root) return tl::unexpected(root.error());
  try {
    return parse_placement(in, cluster, *root);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}

Result<std::vector<GpuId>> read_placement_file(const Cluster& cluster, const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return tl::unexpected(text.error());
  return parse_placement_text(cluster, *text, path);
}

}  // namespace toposched
