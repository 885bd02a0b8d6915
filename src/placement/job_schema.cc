#include "placement/job_schema.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/json_input.h"
#include "topology/hostlist.h"

namespace toposched {

namespace {

Result<void> bad(std::string message) { return make_error(ErrorCode::kInvalidArgument, std::move(message)); }

Result<void> check_workload(std::string_view name) {
  if (parse_workload_kind(name)) return {};
  return bad(fmt::format("must be training, inference or inference-pd, found '{}'", name));
}

Result<void> check_job_id_row(std::string_view id) { return check_job_id(id); }

Result<void> check_slurm_version(std::string_view v) {
  if (v == "22.05" || v == "24.05" || v == "25.11" || v == "26.05") return {};
  return bad(fmt::format("must be 22.05, 24.05, 25.11 or 26.05, found '{}'", v));
}

Result<void> check_slice_layers(std::string_view text) {
  auto layers = parse_slice_layers(text);
  if (!layers) return bad(layers.error().message);
  return {};
}

// The hostlist's syntax; its names are looked up in the cluster when the job is placed.
Result<void> check_within_nodes(std::string_view text) {
  if (text.empty()) return bad("expected a hostlist of node names, found an empty text");
  // No cluster has more nodes than this; a short text naming more is refused unexpanded.
  constexpr std::size_t kMaxNodes = 1'000'000;
  auto names = expand_hostlist(text, kMaxNodes);
  if (!names) return bad(fmt::format("{} at column {} of '{}'", names.error().message, names.error().where.column, text));
  return {};
}

Result<void> check_block_sizes(std::string_view text) {
  auto sizes = parse_block_size_list(text);
  if (!sizes) return bad(sizes.error().message);
  return {};
}

#define TOPOSCHED_FIELD(member) [](PlaceRequest& r) -> JobFieldRef { return &r.member; }

constexpr std::int64_t kMax = kMaxCount;

// The order of `toposched place --help`. Bounds: counts and degrees from 1 to kMaxCount
// (a job never needs more GPUs than that, and products of degrees stay far from int64's
// range: parallel_product checks them anyway).
// Rows leave their trailing members (annotation, always_written, check, alias) at their
// defaults.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const JobField kFields[] = {
    {"gpus", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.gpus), "Number of GPUs the job needs", "--gpus,-G"},
    {"nodes", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.nodes),
     "Number of whole nodes, exclusive (instead of --gpus)", "--nodes,-N"},
    {"gpus_per_node", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.gpus_per_node),
     "GPUs on every node the job uses (Slurm --gpus-per-node)", "--gpus-per-node"},
    {"gpus_per_pod", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.gpus_per_pod),
     "The job comes as pods of this many GPUs, each pod's GPUs on one node, several pods to a node allowed "
     "(Kubernetes pod groups)",
     "--gpus-per-pod"},
    {"exclusive", JobFieldType::kBool, 0, 1, TOPOSCHED_FIELD(job.exclusive),
     "Do not share nodes with other jobs (implied by --nodes)", "--exclusive"},
    {"tp", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.tp),
     "Tensor-parallel degree: GPUs per TP group, kept inside a node (default 1)", "--tp", "toposched.io/tp", true},
    {"pp", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.pp), "Pipeline-parallel stages (default 1)", "--pp",
     "toposched.io/pp", true},
    {"dp", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.dp),
     "Data-parallel degree (default: what is left of the GPUs)", "--dp", "toposched.io/dp"},
    {"ep", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.ep), "Expert-parallel degree (default 1)", "--ep",
     "toposched.io/ep", true},
    {"cp", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.cp), "Context-parallel degree (default 1)", "--cp",
     "toposched.io/cp", true},
    {"kind", JobFieldType::kWorkload, 0, 0, TOPOSCHED_FIELD(job.workload),
     "training (one gang, default), inference (independent replicas) or inference-pd (prefill + decode pools)",
     "--workload", "toposched.io/kind", true, check_workload, "workload"},
    {"model", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.model_class),
     "Cost-model workload class for the prediction (llm-dense, llm-moe, dp-vision, inference)", "--model"},
    {"replica_gpus", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.replica_gpus),
     "Inference: GPUs per replica (default tp x pp)", "--replica-gpus"},
    {"gpu_model", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.gpu_model),
     "Only nodes whose GPU model contains this text (case-insensitive), e.g. H100", "--gpu-model"},
    {"within_nodes", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.within_nodes),
     "Only these nodes, some or all of them (a hostlist, e.g. dgx-h100-[001-004])", "--within-nodes", "", false,
     check_within_nodes},
    {"required_tier", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.required_tier),
     "All GPUs under one switch of this tier (or 'node'), like Kueue's required topology; tiers may also be named by "
     "node label (fabric.topograph.run/tier-N, kubernetes.io/hostname)",
     "--required-tier",
     "kueue.x-k8s.io/podset-required-topology"},
    {"preferred_tier", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.preferred_tier),
     "Prefer all GPUs under one switch of this tier (or 'node'), like Kueue's preferred topology",
     "--preferred-tier", "kueue.x-k8s.io/podset-preferred-topology"},
    {"slice_size", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.slice_size),
     "Pods per slice, each slice inside one --slice-tier domain (Kueue podset-slice-size; a pod is one GPU, or "
     "--gpus-per-node, else --gpus-per-pod GPUs; kueue-bestfit only)",
     "--slice-size", "kueue.x-k8s.io/podset-slice-size"},
    {"slice_tier", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.slice_tier),
     "Tier (or 'node') each slice stays inside (Kueue podset-slice-required-topology)", "--slice-tier",
     "kueue.x-k8s.io/podset-slice-required-topology"},
    {"slice_layer", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.slice_layers_text),
     "TIER:SIZE: a further slice layer inside each slice, outermost first, repeatable or comma-separated "
     "(Kueue podset-slice-required-topology-constraints; e.g. --slice-size 8 --slice-tier rack --slice-layer "
     "node:4)",
     "--slice-layer", "", false, check_slice_layers, "", true},
    {"unconstrained", JobFieldType::kBool, 0, 1, TOPOSCHED_FIELD(job.unconstrained),
     "No tier constraint, said explicitly (Kueue podset-unconstrained-topology): kueue-bestfit fills the nodes "
     "with the least free capacity first",
     "--unconstrained", "kueue.x-k8s.io/podset-unconstrained-topology"},
    {"switches", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.max_switches),
     "At most this many leaf switches (Slurm --switches)", "--switches"},
    {"segment", JobFieldType::kInt, 1, kMax, TOPOSCHED_FIELD(job.segment),
     "Nodes per segment, each inside one base block (Slurm --segment; slurm-block only)", "--segment"},
    {"consolidate_segments", JobFieldType::kBool, 0, 1, TOPOSCHED_FIELD(job.consolidate_segments),
     "Keep every --segment in one block of the level that holds the whole job (Slurm --consolidate-segments; "
     "slurm-block only)",
     "--consolidate-segments"},
    {"slurm_version", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.slurm_version),
     "Slurm release whose rules slurm-block and slurm-tree follow: 22.05, 24.05, 25.11 or 26.05 (default 26.05)",
     "--slurm-version", "", false, check_slurm_version},
    {"block_sizes", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.block_sizes_text),
     "slurm-block: the BlockSizes of the topology.conf it reads, e.g. 18,72 (default: those 'export --to "
     "slurm-block' computes)",
     "--block-sizes", "", false, check_block_sizes},
    // Any 64-bit unsigned value (min/max unused for the type's full range).
    {"seed", JobFieldType::kUint64, 0, 0, TOPOSCHED_FIELD(job.seed), "Seed of the random policy (default 1)",
     "--seed"},
    {"policy", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(policy),
     "first-fit, random, slurm-tree, slurm-block, kueue-bestfit, kueue-balanced or topo (default)", "--policy,-p",
     "toposched.io/policy", true},
    {"job", JobFieldType::kString, 0, 0, TOPOSCHED_FIELD(job.job_id),
     "Job id (default: job-N, the first one free in the state)", "--job,-j", "", true, check_job_id_row},
};
#pragma GCC diagnostic pop

#undef TOPOSCHED_FIELD

std::string bounds_text(const JobField& f) {
  if (f.min == 1) return "a positive whole number";
  return fmt::format("a whole number of at least {}", f.min);
}

Result<void> set_int(const JobField& f, std::int64_t v, PlaceRequest& r, std::string_view found) {
  if (v < f.min) return bad(fmt::format("must be {}, found {}", bounds_text(f), found));
  if (v > f.max) return bad(fmt::format("must be at most {}, found {}", f.max, found));
  *std::get<int*>(f.ref(r)) = static_cast<int>(v);
  return {};
}

Result<void> set_string(const JobField& f, std::string value, PlaceRequest& r) {
  if (f.check) TOPOSCHED_CHECK(f.check(value));
  JobFieldRef ref = f.ref(r);
  if (f.type == JobFieldType::kWorkload)
    *std::get<WorkloadKind*>(ref) = *parse_workload_kind(value);
  else
    *std::get<std::string*>(ref) = std::move(value);
  return {};
}

}  // namespace

std::span<const JobField> job_fields() { return kFields; }

const JobField* find_job_field(std::string_view key) {
  for (const JobField& f : kFields)
    if (f.key == key || (!f.alias.empty() && f.alias == key)) return &f;
  return nullptr;
}

Result<void> check_job_id(std::string_view id) {
  if (id.empty()) return bad("needs a non-empty job id (omit it for the first free job-N)");
  if (id.size() > 253) return bad("must be at most 253 characters");
  for (char ch : id)
    if (ch == '/' || ch == '?' || ch == '#' || ch == '%' || static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f)
      return bad(fmt::format("may not contain '/', '?', '#', '%', spaces or control characters, found '{}'", id));
  return {};
}

Result<void> set_job_field_from_text(const JobField& f, std::string_view text, PlaceRequest& r) {
  switch (f.type) {
    case JobFieldType::kInt: {
      std::int64_t v = 0;
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
        return bad(fmt::format("must be {}, found '{}'", bounds_text(f), text));
      return set_int(f, v, r, fmt::format("'{}'", text));
    }
    case JobFieldType::kUint64: {
      std::uint64_t v = 0;
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
        return bad(fmt::format("must be a non-negative whole number, found '{}'", text));
      *std::get<std::uint64_t*>(f.ref(r)) = v;
      return {};
    }
    case JobFieldType::kBool:
      if (text == "true" || text == "1") {
        *std::get<bool*>(f.ref(r)) = true;
      } else if (text == "false" || text == "0") {
        *std::get<bool*>(f.ref(r)) = false;
      } else {
        return bad(fmt::format("must be true or false, found '{}'", text));
      }
      return {};
    case JobFieldType::kString:
    case JobFieldType::kWorkload:
      return set_string(f, std::string(text), r);
  }
  return {};
}

Result<void> set_job_field_from_json(const JobField& f, const nlohmann::json& v, PlaceRequest& r) {
  auto named = [&](Result<void> ok) -> Result<void> {
    if (ok) return ok;
    return bad(fmt::format("'{}' {}", f.key, ok.error().message));
  };
  switch (f.type) {
    case JobFieldType::kInt:
      if (!v.is_number_integer()) return bad(fmt::format("'{}' must be an integer, found {}", f.key, quote_json(v)));
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMax))
        return named(bad(fmt::format("must be at most {}, found {}", f.max, quote_json(v))));
      return named(set_int(f, v.get<std::int64_t>(), r, quote_json(v)));
    case JobFieldType::kUint64:
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
        return bad(fmt::format("'{}' must be a non-negative integer, found {}", f.key, quote_json(v)));
      *std::get<std::uint64_t*>(f.ref(r)) = v.get<std::uint64_t>();
      return {};
    case JobFieldType::kBool:
      if (!v.is_boolean()) return bad(fmt::format("'{}' must be true or false, found {}", f.key, quote_json(v)));
      *std::get<bool*>(f.ref(r)) = v.get<bool>();
      return {};
    case JobFieldType::kString:
    case JobFieldType::kWorkload:
      if (!v.is_string()) return bad(fmt::format("'{}' must be a string, found {}", f.key, quote_json(v)));
      return named(set_string(f, v.get<std::string>(), r));
  }
  return {};
}

void write_job_field_json(const JobField& f, const PlaceRequest& request, nlohmann::ordered_json& out) {
  static const PlaceRequest kDefaults;
  auto& r = const_cast<PlaceRequest&>(request);
  auto& d = const_cast<PlaceRequest&>(kDefaults);
  JobFieldRef ref = f.ref(r);
  JobFieldRef def = f.ref(d);
  auto differs = [&]<class T>(T* value) { return *value != *std::get<T*>(def); };
  if (!f.always_written && !std::visit(differs, ref)) return;
  std::visit(
      [&]<class T>(T* value) {
        if constexpr (std::is_same_v<T, WorkloadKind>)
          out[std::string(f.key)] = workload_kind_name(*value);
        else
          out[std::string(f.key)] = *value;
      },
      ref);
}

Result<std::int64_t> parallel_product(const JobRequest& r, bool with_dp) {
  std::int64_t product = 1;
  const std::pair<std::string_view, int> degrees[] = {
      {"tp", r.tp}, {"cp", r.cp}, {"ep", r.ep}, {"pp", r.pp}, {"dp", with_dp ? r.dp : 1}};
  for (const auto& [name, degree] : degrees) {
    if (__builtin_mul_overflow(product, static_cast<std::int64_t>(degree), &product) || product > kMaxCount)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("the parallel degrees tp={} cp={} ep={} pp={}{} multiply to more than {} GPUs",
                                    r.tp, r.cp, r.ep, r.pp, with_dp ? fmt::format(" dp={}", r.dp) : "", kMaxCount));
  }
  return product;
}

}  // namespace toposched
