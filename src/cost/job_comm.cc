#include "cost/job_comm.h"

#include <algorithm>
#include <map>
#include <array>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "cost/compute.h"
#include "topology/registry.h"

namespace toposched {

namespace {


int kind_index(std::string_view kind) {
  for (int i = 0; i < 5; ++i)
    if (kParallelKinds[i] == kind) return i;
  return -1;
}

std::array<int, 5> sizes_of(const ParallelPlan& p) { return {p.tp, p.cp, p.ep, p.dp, p.pp}; }

// Dimension kinds (indices into kParallelKinds) innermost first, from plan.order.
Result<std::array<int, 5>> parse_order(std::string_view order) {
  std::array<int, 5> dims{};
  std::array<bool, 5> seen{};
  int count = 0;
  std::size_t start = 0;
  while (start <= order.size()) {
    std::size_t dash = order.find('-', start);
    if (dash == std::string_view::npos) dash = order.size();
    std::string_view part = order.substr(start, dash - start);
    int k = kind_index(part);
    if (k < 0 || count >= 5 || seen[static_cast<std::size_t>(k)])
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("rank order '{}' must name each of tp, cp, ep, dp, pp exactly once, "
                                    "innermost first, joined by '-' (e.g. tp-cp-ep-dp-pp)",
                                    order));
    seen[static_cast<std::size_t>(k)] = true;
    dims[static_cast<std::size_t>(count++)] = k;
    start = dash + 1;
    if (dash == order.size()) break;
  }
  if (count != 5)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("rank order '{}' must name each of tp, cp, ep, dp, pp exactly once", order));
  return dims;
}

// Stride of each kind in the global rank numbering.
std::array<int, 5> strides_of(const ParallelPlan& plan, const std::array<int, 5>& dims) {
  auto sizes = sizes_of(plan);
  std::array<int, 5> stride{};
  int s = 1;
  for (int d : dims) {
    stride[static_cast<std::size_t>(d)] = s;
    s *= sizes[static_cast<std::size_t>(d)];
  }
  return stride;
}

struct KindTraffic {
  Collective collective;
  double bytes;
  int calls;
  // A second collective of the same bytes in each call (sequence parallelism: an all-gather
  // and a reduce-scatter where Megatron without it runs one all-reduce).
  std::optional<Collective> paired = std::nullopt;
};

// What one group of each kind moves per step (see job_comm.h).
std::array<KindTraffic, 5> traffic_of(const ParallelPlan& plan, const WorkloadModel& m) {
  const double tokens = static_cast<double>(m.sequence) / plan.cp * m.micro_batch;
  const double act = tokens * m.hidden * m.bytes_per_element;  // one micro-batch's activations
  const int layers_per_stage = (m.layers + plan.pp - 1) / plan.pp;
  const int moe_every = std::max(1, m.moe_layer_interval);
  const int moe_layers = m.experts > 0 ? (layers_per_stage + moe_every - 1) / moe_every : 0;
  // Forward (+ backward); full recomputation runs each layer's forward again before its
  // backward, with the TP all-reduces, CP all-gathers and EP all-to-alls of that forward
  // (Megatron's checkpointed layer re-enters the same forward code).
  const int passes = m.training ? (m.recompute == Recompute::kFull ? 3 : 2) : 1;
  std::array<KindTraffic, 5> t{};
  // With sequence parallelism Megatron's f/g become an all-gather before the column-parallel
  // GEMMs and a reduce-scatter after the row-parallel ones (Korthikanti et al. 2022, §4.2.2;
  // megatron/core/tensor_parallel/mappings.py): the same ring bytes as an all-reduce, but
  // two NCCL calls, and NVLink SHARP accelerates the all-reduce more than the pair.
  t[0] = {Collective::kAllReduce, act, 2 * passes * layers_per_stage * m.micro_batches};
  if (m.sequence_parallel && plan.tp > 1)
    t[0] = {Collective::kAllGather, act, t[0].calls, Collective::kReduceScatter};
  // K and V of this rank's heads (GQA: kv_heads of them); the backward reduce-scatter moves the same bytes.
  const double kv_share = m.heads > 0 && m.kv_heads > 0 ? static_cast<double>(m.kv_heads) / m.heads : 1.0;
  t[1] = {Collective::kAllGather, 2.0 * m.sequence * m.micro_batch * m.hidden * kv_share * m.bytes_per_element / plan.tp,
          passes * layers_per_stage * m.micro_batches};
  t[2] = {Collective::kAllToAll, act / plan.tp * std::max(1, m.top_k), 2 * passes * moe_layers * m.micro_batches};
  const double f = std::clamp(m.expert_parameter_fraction, 0.0, 1.0);
  const double params_per_rank = m.parameters * ((1 - f) + f / plan.ep) / (static_cast<double>(plan.tp) * plan.pp);
  // The distributed optimizer reduce-scatters the gradients and all-gathers the updated
  // (activation-precision) parameters: per element half of each, as one all-reduce's bytes.
  const double dp_element = m.distributed_optimizer ? (m.grad_bytes_per_element + m.bytes_per_element) / 2
                                                    : m.grad_bytes_per_element;
  t[3] = {Collective::kAllReduce, params_per_rank * dp_element, m.training ? 1 : 0};
  // Interleaved (virtual_stages chunks per stage): each micro-batch crosses every stage
  // boundary once per chunk.
  t[4] = {Collective::kSendRecv, act / plan.tp, (m.training ? 2 : 1) * m.micro_batches * std::max(m.virtual_stages, 1)};
  return t;
}

struct KindTimes {
  std::array<double, 5> time{};
  std::array<int, 5> groups{};
};

Result<KindTimes> kind_times(const Cluster& cluster, std::span<const GpuId> gpus, const ParallelPlan& plan,
                             const std::array<int, 5>& dims, const std::array<KindTraffic, 5>& traffic,
                             const CostOptions& options) {
  const auto sizes = sizes_of(plan);
  const auto stride = strides_of(plan, dims);
  const int n = plan.gpus();
  KindTimes out;
  std::vector<GpuId> members;
  // Each group's time from the shared group cache: the same numbers as estimate_collective
  // per group, without re-deriving a graph or an algorithm choice that an equivalent group
  // (a whole node of the same type, the same islands and crossings) already gave.
  GroupCollectiveCosts costs(cluster, options);
  for (int k = 0; k < 5; ++k) {
    const int size = sizes[static_cast<std::size_t>(k)];
    const KindTraffic& tr = traffic[static_cast<std::size_t>(k)];
    if (size <= 1) continue;
    const int st = stride[static_cast<std::size_t>(k)];
    double worst = 0;
    int groups = 0;
    // The groups' first members in increasing order: the ranks whose coordinate of this kind
    // is 0, r = block * st * size + i for i < st (no division per rank; st * size divides n).
    for (int block = 0; block < n; block += st * size) {
      for (int r = block; r < block + st; ++r) {
        members.clear();
        for (int j = 0; j < size; ++j) members.push_back(gpus[static_cast<std::size_t>(r + j * st)]);
        ++groups;
        if (tr.calls == 0 || tr.bytes <= 0) continue;
        const std::array<Collective, 2> both = {tr.collective, tr.paired.value_or(tr.collective)};
        auto per_call = costs.time_us(members, std::span<const Collective>(both.data(), tr.paired ? 2 : 1), tr.bytes);
        if (!per_call) return tl::unexpected(per_call.error());
        worst = std::max(worst, *per_call * tr.calls);
      }
    }
    out.time[static_cast<std::size_t>(k)] = worst;
    out.groups[static_cast<std::size_t>(k)] = groups;
  }
  return out;
}

}  // namespace

int ParallelPlan::gpus() const { return tp * pp * dp * ep * cp; }

Result<void> validate_plan(const ParallelPlan& plan) {
  auto sizes = sizes_of(plan);
  long long product = 1;
  for (int i = 0; i < 5; ++i) {
    if (sizes[static_cast<std::size_t>(i)] < 1 || sizes[static_cast<std::size_t>(i)] > 1'000'000)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("parallel size {} must be in 1..1000000, found {}", kParallelKinds[i],
                                    sizes[static_cast<std::size_t>(i)]));
    product *= sizes[static_cast<std::size_t>(i)];
    if (product > 10'000'000)
      return make_error(ErrorCode::kInvalidArgument, "tp x pp x dp x ep x cp exceeds 10,000,000 GPUs");
  }
  if (auto d = parse_order(plan.order); !d) return tl::unexpected(d.error());
  return {};
}

namespace {

// The workload classes, one function each (the fields with their published sources).
WorkloadModel llm_dense_class() {
  WorkloadModel m;
  m.name = "llm-dense";
  // Llama 2 70B (Touvron et al., 2023, table 1 and the released config): 80 layers, hidden
  // 8192, 64 heads with 8 KV heads (GQA), SwiGLU MLP of 28672, vocabulary 32000, 4k context.
  m.parameters = 70e9;
  m.hidden = 8192;
  m.layers = 80;
  m.heads = 64;
  m.kv_heads = 8;
  m.ffn_hidden = 28672;
  m.gated_mlp = true;
  m.vocabulary = 32000;
  m.sequence = 4096;
  m.micro_batch = 1;
  m.micro_batches = 8;
  m.grad_bytes_per_element = 4;  // Megatron reduces bf16 training's gradients in fp32
  return m;
}

WorkloadModel llm_moe_class() {
  WorkloadModel m;
  m.name = "llm-moe";
  // Mixtral 8x7B (Jiang et al., 2024): 46.7B parameters, 32 layers, hidden 4096, 32 heads
  // with 8 KV heads, SwiGLU experts of 14336, 8 experts, top-2 routing, vocabulary 32000;
  // about 45B of the parameters are in the experts.
  m.parameters = 46.7e9;
  m.hidden = 4096;
  m.layers = 32;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.gated_mlp = true;
  m.vocabulary = 32000;
  m.sequence = 4096;
  m.micro_batch = 1;
  m.micro_batches = 8;
  m.experts = 8;
  m.top_k = 2;
  m.expert_parameter_fraction = 0.96;
  m.grad_bytes_per_element = 4;
  return m;
}

WorkloadModel dp_vision_class() {
  WorkloadModel m;
  m.name = "dp-vision";
  // ResNet-50 (He et al., 2016) data-parallel: 25.6M parameters, fp32 gradients (AMP keeps
  // fp32 weights), 256 images per GPU and step (NVIDIA DeepLearningExamples' batch); DDP
  // overlaps its bucketed allreduce with the backward pass.
  m.family = ModelFamily::kVision;
  m.distributed_optimizer = false;
  m.parameters = 25.6e6;
  m.grad_bytes_per_element = 4;
  m.bytes_per_element = 4;
  m.micro_batch = 256;
  m.precision = Precision::kFp16;
  m.forward_gflops_per_sample = 4.1;
  m.activation_bytes_per_sample = resnet50_elementwise_bytes_per_image();
  return m;
}

WorkloadModel recommendation_class() {
  WorkloadModel m;
  m.name = "recommendation";
  // DLRM-DCNv2 as in MLPerf Training's recommendation benchmark (Criteo 4 TB; Wang et
  // al., "DCN V2", 2021): dense part ~16M parameters (bottom MLP 13-512-256-128, three
  // low-rank cross layers on 27 x 128 inputs, top MLP 1024-1024-512-256-1), so 0.032
  // GFLOPs forward per sample; 26 embedding lookups of 128 fp32 values (13 KB) per sample;
  // 6,912 samples per GPU (MLPerf's global batch of 55,296 on 8 GPUs). The dense gradients
  // are all-reduced across DP; the embedding all-to-all is not modelled (docs/cost-model.md).
  m.family = ModelFamily::kRecommendation;
  m.distributed_optimizer = false;
  m.parameters = 16e6;
  m.grad_bytes_per_element = 4;
  m.bytes_per_element = 4;
  m.micro_batch = 6912;
  m.precision = Precision::kFp16;
  m.forward_gflops_per_sample = 0.032;
  m.embedding_bytes_per_sample = 26 * 128 * 4;
  return m;
}

WorkloadModel inference_class() {
  WorkloadModel m;
  m.name = "inference";
  // Serving a 70B model: one decode step of 64 sequences, forward only, TP allreduces.
  m.parameters = 70e9;
  m.hidden = 8192;
  m.layers = 80;
  m.heads = 64;
  m.kv_heads = 8;
  m.sequence = 1;
  m.micro_batch = 64;
  m.micro_batches = 1;
  m.training = false;
  return m;
}

const Registry<WorkloadModel (*)()>& workload_classes() {
  static const Registry<WorkloadModel (*)()> kClasses(
      "workload class", {{"llm-dense", "Llama 2 70B training, TP/PP/DP", &llm_dense_class},
                         {"llm-moe", "Mixtral 8x7B training, with expert parallelism", &llm_moe_class},
                         {"dp-vision", "ResNet-50 v1.5, data parallel", &dp_vision_class},
                         {"recommendation", "DLRM-DCNv2 as in MLPerf Training, data parallel", &recommendation_class},
                         {"inference", "70B serving, one decode step of 64 sequences", &inference_class}});
  return kClasses;
}

}  // namespace

Result<WorkloadModel> workload_class(std::string_view name) {
  TOPOSCHED_TRY(make, workload_classes().find(name));
  return make();
}

// The names in the registry's order, as string_views into its rows (which live as long as it).
std::span<const std::string_view> workload_class_names() {
  static const std::vector<std::string_view> kNames = [] {
    std::vector<std::string_view> out;
    for (const auto& row : workload_classes().rows()) out.push_back(row.name);
    return out;
  }();
  return kNames;
}

Result<void> validate_workload(const WorkloadModel& m) {
  auto bad = [](std::string what) { return make_error(ErrorCode::kInvalidArgument, std::move(what)); };
  if (!std::isfinite(m.parameters) || m.parameters < 0) return bad("model parameters must be a non-negative number");
  if (m.hidden < 0 || m.layers < 0 || m.sequence < 0)
    return bad("hidden size, layers and sequence length must not be negative");
  if (m.micro_batch < 1 || m.micro_batches < 1)
    return bad("micro-batch size and micro-batches per step must be at least 1");
  if (!(m.bytes_per_element > 0) || !(m.grad_bytes_per_element > 0) || m.bytes_per_element > 16 ||
      m.grad_bytes_per_element > 16)
    return bad("bytes per element must be in (0, 16]");
  if (m.experts < 0 || m.top_k < 1 || (m.experts > 0 && m.top_k > m.experts))
    return bad("experts must be >= 0 and top_k in 1..experts");
  if (!(m.expert_parameter_fraction >= 0 && m.expert_parameter_fraction <= 1))
    return bad("expert parameter fraction must be in [0, 1]");
  if (m.moe_layer_interval < 1) return bad("MoE layer interval must be at least 1");
  if (!(m.overlap < 1)) return bad("overlap must be below 1 (a negative value selects the per-kind rules)");
  if (!(m.tp_overlap >= 0 && m.tp_overlap < 1)) return bad("tp_overlap must be in [0, 1)");
  if (m.virtual_stages < 1) return bad("virtual stages must be at least 1");
  if (m.heads < 0 || m.kv_heads < 0 || m.ffn_hidden < 0 || m.vocabulary < 0)
    return bad("heads, kv_heads, ffn_hidden and vocabulary must not be negative");
  if (m.heads > 0 && m.kv_heads > m.heads) return bad("kv_heads must not exceed heads");
  if (!(m.forward_gflops_per_sample >= 0) || !(m.embedding_bytes_per_sample >= 0) || !(m.activation_bytes_per_sample >= 0))
    return bad("per-sample FLOPs, embedding and activation bytes must not be negative");
  if (!std::isfinite(m.compute_us_per_step) || m.compute_us_per_step < 0)
    return bad("compute time per step must not be negative");
  return {};
}

Result<std::vector<int>> group_of_rank(const ParallelPlan& plan, std::string_view kind, int rank) {
  if (auto v = validate_plan(plan); !v) return tl::unexpected(v.error());
  int k = kind_index(kind);
  if (k < 0)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("unknown parallel kind '{}'; kinds: tp, cp, ep, dp, pp", kind));
  if (rank < 0 || rank >= plan.gpus())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("rank {} is outside 0..{}", rank, plan.gpus() - 1));
  auto dims = *parse_order(plan.order);
  auto stride = strides_of(plan, dims);
  auto sizes = sizes_of(plan);
  const int st = stride[static_cast<std::size_t>(k)];
  const int size = sizes[static_cast<std::size_t>(k)];
  int coord = (rank / st) % size;
  int first = rank - coord * st;
  std::vector<int> out;
  for (int j = 0; j < size; ++j) out.push_back(first + j * st);
  return out;
}

// long: the node-taking and stage-aligned helpers share the job's type and need, then one walk
// of scopes smallest first; splitting them would pass that state through every call
Result<std::vector<GpuId>> ideal_placement(const Cluster& cluster, int gpu_count, GpuId like, int stage_gpus) {
  if (!like.valid() || like.index() >= cluster.gpu_count())
    return make_error(ErrorCode::kInvalidArgument, "ideal placement: the reference GPU is not in the cluster");
  if (gpu_count < 1) return make_error(ErrorCode::kInvalidArgument, "ideal placement needs at least one GPU");
  const NodeTypeId type = cluster.node_type_id(cluster.gpu_node(like));
  const int per_node = cluster.node_type_at(type).gpu_count;
  const std::size_t need = static_cast<std::size_t>((gpu_count + per_node - 1) / per_node);
  auto take = [&](const std::vector<NodeId>& nodes) -> std::optional<std::vector<GpuId>> {
    std::vector<GpuId> out;
    for (NodeId n : nodes) {
      if (cluster.node_type_id(n) != type) continue;
      for (int i = 0; i < per_node && static_cast<int>(out.size()) < gpu_count; ++i)
        out.push_back(cluster.node_gpu(n, i));
      if (static_cast<int>(out.size()) == gpu_count) return out;
    }
    return std::nullopt;
  };
  // Stages of whole nodes go whole into one NVLink domain (or leaf switch) when one holds
  // them, in the order the nodes come: a stage split over two of them would send its DP
  // all-reduce up a tier that packing in node order need not use.
  const bool staged = stage_gpus > 0 && stage_gpus < gpu_count && stage_gpus % per_node == 0 && gpu_count % stage_gpus == 0;
  auto container = [&](NodeId n) -> std::uint64_t {
    if (DomainId d = cluster.node_domain(n); d.valid()) return d.value;
    SwitchId sw = cluster.node_switch(n);
    return (std::uint64_t{1} << 32) | (sw.valid() ? sw.value : 0xffffffffu);
  };
  auto take_staged = [&](const std::vector<NodeId>& nodes) -> std::optional<std::vector<GpuId>> {
    const std::size_t stage_nodes = static_cast<std::size_t>(stage_gpus / per_node);
    std::vector<std::uint64_t> order;                      // containers, first-seen order
    std::map<std::uint64_t, std::vector<NodeId>> members;  // their nodes of the type, in order
    for (NodeId n : nodes) {
      if (cluster.node_type_id(n) != type) continue;
      auto [it, fresh] = members.try_emplace(container(n));
      if (fresh) order.push_back(it->first);
      it->second.push_back(n);
    }
    std::vector<GpuId> out;
    int stages = gpu_count / stage_gpus;
    for (std::uint64_t key : order) {
      const std::vector<NodeId>& m = members[key];
      for (std::size_t first = 0; stages > 0 && first + stage_nodes <= m.size(); first += stage_nodes, --stages)
        for (std::size_t k = first; k < first + stage_nodes; ++k)
          for (int i = 0; i < per_node; ++i) out.push_back(cluster.node_gpu(m[k], i));
    }
    if (stages > 0) return std::nullopt;
    return out;
  };
  auto count_of_type = [&](const std::vector<NodeId>& nodes) {
    std::size_t c = 0;
    for (NodeId n : nodes) c += cluster.node_type_id(n) == type;
    return c;
  };
  if (need == 1) {
    for (std::uint32_t n = 0; n < cluster.node_count(); ++n)
      if (cluster.node_type_id(NodeId(n)) == type) {
        std::vector<GpuId> out;
        for (int i = 0; i < gpu_count; ++i) out.push_back(cluster.node_gpu(NodeId(n), i));
        return out;
      }
  }
  // The smallest domain, then switch, that holds the job (stage-aligned when it has stages,
  // else packed in node order); the whole cluster last. A scope with fewer nodes than the job
  // needs is passed over without counting its nodes, and the whole cluster's node list is
  // built only when no smaller scope holds the job: a job that fits a leaf costs
  // O(scopes + its leaf), not O(nodes) (docs/performance.md, "Scale: 100,000 GPUs").
  std::vector<const std::vector<NodeId>*> scopes;
  for (std::uint32_t d = 0; d < cluster.domain_count(); ++d) scopes.push_back(&cluster.domain_nodes(DomainId(d)));
  for (std::size_t tier = 0; tier < cluster.tiers().size(); ++tier)
    for (std::uint32_t s = 0; s < cluster.switch_count(); ++s)
      if (cluster.switch_tier(SwitchId(s)) == static_cast<int>(tier)) scopes.push_back(&cluster.switch_subtree_nodes(SwitchId(s)));
  std::vector<NodeId> all;
  const auto holds = [&](const std::vector<NodeId>& nodes) { return nodes.size() >= need && count_of_type(nodes) >= need; };
  const auto whole_cluster = [&]() -> const std::vector<NodeId>& {
    if (all.empty())
      for (std::uint32_t n = 0; n < cluster.node_count(); ++n) all.push_back(NodeId(n));
    return all;
  };
  if (staged) {
    for (const std::vector<NodeId>* nodes : scopes)
      if (holds(*nodes))
        if (auto out = take_staged(*nodes)) return *out;
    if (holds(whole_cluster()))
      if (auto out = take_staged(all)) return *out;
  }
  for (const std::vector<NodeId>* nodes : scopes)
    if (holds(*nodes))
      if (auto out = take(*nodes)) return *out;
  if (holds(whole_cluster()))
    if (auto out = take(all)) return *out;
  return make_error(ErrorCode::kInfeasible, fmt::format("cluster '{}' has fewer than {} GPUs of node type '{}'",
                                                        cluster.name(), gpu_count, cluster.node_type_at(type).name));
}

namespace {

// What of the DP time `time_us` (`bytes` per call) the step waits for (job_comm.h): the
// reduce-scatter of a bucket starts once the last micro-batch's backward has produced it and
// the all-gather of updated parameters runs ahead of the next forward, so one micro-batch's
// compute hides DP time; without the distributed optimizer (no all-gather; PyTorch DDP,
// Megatron 2020) its backward only, 2/3 of it. At least the last bucket is exposed. The
// same window with an interleaved pipeline: the DGX Cloud recipes (VP 5-12) lose what this
// rule predicts when DP grows 16-32x (docs/cost-model.md, "Fidelity against published runs").
double dp_exposed_us(double time_us, double bytes, const WorkloadModel& m) {
  const double compute = m.compute_us_per_step;
  if (compute <= 0) return time_us;
  const bool transformer = m.family == ModelFamily::kTransformer;
  const double per_microbatch = compute / std::max(m.micro_batches, 1);
  const double window = transformer && m.distributed_optimizer ? per_microbatch : per_microbatch * 2.0 / 3.0;
  const double bucket_bytes = transformer ? kMegatronBucketParameters * m.grad_bytes_per_element : kDdpBucketBytes;
  const double last_bucket = time_us * std::min(1.0, bytes > 0 ? bucket_bytes / bytes : 1.0);
  return std::max(time_us - window, last_bucket);
}

// Compute that runs beside a NCCL kernel runs slower: the kernel holds SMs (one thread block
// per channel) and HBM bandwidth. Lee et al., "Characterizing Compute-Communication Overlap
// in GPU-Accelerated Distributed Deep Learning: Performance and Power Implications" (arXiv
// 2507.03114, 2025), measure an average compute slowdown of 18.9% (at most 40%) when
// collectives overlap the compute of GPT and Llama training on A100 and H100 against the
// same compute alone. The step pays that share of every hidden microsecond.
constexpr double kOverlapComputeSlowdown = 0.189;

// Not hidden, plus the slowdown of the compute that hid the rest.
double with_interference(double time_us, double not_hidden_us) {
  const double hidden = std::max(0.0, time_us - not_hidden_us);
  return not_hidden_us + kOverlapComputeSlowdown * hidden;
}

// The part of one kind's time that no compute hides (the overlap rules of job_comm.h).
double exposed_by_rule_us(int kind, double time_us, double bytes, int calls, const ParallelPlan& plan,
                          const WorkloadModel& m) {
  const double compute = m.compute_us_per_step;
  switch (kind) {
    case 0:  // tp: inside the layer, on the critical path
      return time_us * (1 - m.tp_overlap);
    case 3:  // dp: bucketed, overlapped with backward (and, sharded, the next forward)
      return dp_exposed_us(time_us, bytes, m);
    case 4: {  // pp: only the fill and drain transfers wait
      // One transfer per bubble slot lies on the critical path: pp - 1 in the fill (forward)
      // and pp - 1 in the drain (backward), with or without interleaving (the interleaved
      // schedule's bubble is pp - 1 chunk slots; its other sends, v times as many, overlap
      // other micro-batches' chunks).
      if (compute <= 0 || calls <= 0) return time_us;
      const double critical = (m.training ? 2.0 : 1.0) * (plan.pp - 1);
      return std::min(time_us, time_us / calls * critical);
    }
    default:  // cp, ep: between dependent computations
      return time_us;
  }
}

// What of one kind's per-step time `time_us` the step waits for (job_comm.h): the part not
// hidden by the kind's overlap rule, plus what the hidden part slows the compute it overlaps.
double exposed_us(int kind, double time_us, double bytes, int calls, const ParallelPlan& plan, const WorkloadModel& m) {
  if (time_us <= 0) return 0;
  if (m.overlap >= 0) return time_us * (1 - m.overlap);  // one given fraction, as given
  return with_interference(time_us, exposed_by_rule_us(kind, time_us, bytes, calls, plan, m));
}

Result<void> check_job(const Cluster& cluster, std::span<const GpuId> gpus_by_rank, const ParallelPlan& plan,
                       const WorkloadModel& model) {
  if (auto v = validate_plan(plan); !v) return tl::unexpected(v.error());
  if (auto v = validate_workload(model); !v) return tl::unexpected(v.error());
  if (static_cast<long long>(gpus_by_rank.size()) != plan.gpus())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("the plan needs tp x pp x dp x ep x cp = {} GPUs but {} were given", plan.gpus(),
                                  gpus_by_rank.size()));
  for (std::size_t r = 0; r < gpus_by_rank.size(); ++r)
    if (!gpus_by_rank[r].valid() || gpus_by_rank[r].index() >= cluster.gpu_count())
      return make_error(ErrorCode::kInvalidArgument, fmt::format("rank {}: GPU id {} is not in cluster '{}'", r,
                                                                 gpus_by_rank[r].value, cluster.name()));
  return {};
}

Result<IdealJobComm> ideal_on(const Cluster& cluster, std::span<const GpuId> gpus, const ParallelPlan& plan,
                              const WorkloadModel& model) {
  auto times = kind_times(cluster, gpus, plan, *parse_order(plan.order), traffic_of(plan, model), CostOptions{});
  if (!times) return tl::unexpected(times.error());
  IdealJobComm ideal;
  ideal.kind_time_us = times->time;
  ideal.sizes = sizes_of(plan);
  for (double t : ideal.kind_time_us) ideal.step_comm_us += t;
  return ideal;
}

}  // namespace

Result<IdealJobComm> ideal_job_comm(const Cluster& cluster, const ParallelPlan& plan, const WorkloadModel& model,
                                    GpuId like) {
  if (auto v = validate_plan(plan); !v) return tl::unexpected(v.error());
  if (auto v = validate_workload(model); !v) return tl::unexpected(v.error());
  // PP stages are consecutive ranks when pp is the outermost dimension (the default order).
  const bool pp_outer = plan.order.size() >= 2 && plan.order.ends_with("pp");
  auto gpus = ideal_placement(cluster, plan.gpus(), like, pp_outer && plan.pp > 1 ? plan.gpus() / plan.pp : 0);
  if (!gpus) return tl::unexpected(gpus.error());
  return ideal_on(cluster, *gpus, plan, model);
}

Result<JobCommEstimate> estimate_job_comm(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                          const ParallelPlan& plan, const WorkloadModel& model,
                                          const CostOptions& options) {
  if (auto ok = check_job(cluster, gpus_by_rank, plan, model); !ok) return tl::unexpected(ok.error());
  // The ideal: the same job alone (full network share) on packed whole nodes; if the cluster
  // cannot hold it in the first GPU's node type, the same GPUs in node order.
  auto ideal = ideal_job_comm(cluster, plan, model, gpus_by_rank[0]);
  if (!ideal) {
    std::vector<GpuId> same(gpus_by_rank.begin(), gpus_by_rank.end());
    std::sort(same.begin(), same.end());
    ideal = ideal_on(cluster, same, plan, model);
    if (!ideal) return tl::unexpected(ideal.error());
  }
  return estimate_job_comm(cluster, gpus_by_rank, plan, model, options, *ideal);
}

Result<JobCommEstimate> estimate_job_comm(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                          const ParallelPlan& plan, const WorkloadModel& model,
                                          const CostOptions& options, const IdealJobComm& ideal) {
  if (auto ok = check_job(cluster, gpus_by_rank, plan, model); !ok) return tl::unexpected(ok.error());
  const auto sizes = sizes_of(plan);
  if (ideal.sizes != sizes)
    return make_error(ErrorCode::kInvalidArgument, "the precomputed ideal belongs to a different parallel plan");
  const auto traffic = traffic_of(plan, model);
  auto actual = kind_times(cluster, gpus_by_rank, plan, *parse_order(plan.order), traffic, options);
  if (!actual) return tl::unexpected(actual.error());

  JobCommEstimate est;
  for (int k = 0; k < 5; ++k) {
    const int size = sizes[static_cast<std::size_t>(k)];
    if (size <= 1) continue;
    GroupComm g;
    g.kind = std::string(kParallelKinds[k]);
    g.time_us = actual->time[static_cast<std::size_t>(k)];
    g.ideal_time_us = std::min(ideal.kind_time_us[static_cast<std::size_t>(k)], g.time_us);
    g.groups = actual->groups[static_cast<std::size_t>(k)];
    g.group_size = size;
    const KindTraffic& tr = traffic[static_cast<std::size_t>(k)];
    g.collective = std::string(collective_name(tr.collective));
    if (tr.paired) g.collective += "+" + std::string(collective_name(*tr.paired));
    g.bytes = traffic[static_cast<std::size_t>(k)].bytes;
    g.calls = traffic[static_cast<std::size_t>(k)].calls;
    g.exposed_us = exposed_us(k, g.time_us, g.bytes, g.calls, plan, model);
    g.ideal_exposed_us = exposed_us(k, g.ideal_time_us, g.bytes, g.calls, plan, model);
    est.step_comm_us += g.time_us;
    est.ideal_step_comm_us += g.ideal_time_us;
    est.exposed_comm_us += g.exposed_us;
    est.ideal_exposed_comm_us += g.ideal_exposed_us;
    est.groups.push_back(std::move(g));
  }
  est.ideal_step_comm_us = std::min(est.ideal_step_comm_us, est.step_comm_us);
  est.slowdown = est.ideal_step_comm_us > 0 ? est.step_comm_us / est.ideal_step_comm_us : 1.0;
  est.compute_us = model.compute_us_per_step;
  est.bubble_us = pipeline_bubble_us(model, plan);
  est.straggler_us = straggler_us(model.compute_us_per_step, plan.gpus());
  const double fixed = est.compute_us + est.bubble_us + est.straggler_us;
  est.step_us = fixed + est.exposed_comm_us;
  est.ideal_step_us = fixed + est.ideal_exposed_comm_us;
  if (model.compute_us_per_step > 0)
    est.step_slowdown = est.ideal_step_us > 0 ? std::max(1.0, est.step_us / est.ideal_step_us) : 1.0;
  else
    est.step_slowdown = est.slowdown;
  return est;
}

double pipeline_bubble_us(const WorkloadModel& model, const ParallelPlan& plan) {
  if (!model.training || plan.pp <= 1) return 0;
  return model.compute_us_per_step * (plan.pp - 1.0) /
         (static_cast<double>(std::max(model.virtual_stages, 1)) * std::max(model.micro_batches, 1));
}

double straggler_us(double compute_us, int gpus) {
  if (gpus <= 1 || compute_us <= 0) return 0;
  return compute_us * kGpuSpeedSigma * std::sqrt(2 * std::log(static_cast<double>(gpus)));
}

}  // namespace toposched
