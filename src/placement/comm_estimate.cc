// predict_comm: the bridge from a placement to the cost model (src/cost/job_comm.h). The
// request's parallelism becomes a ParallelPlan in the same rank order the policies use
// ("tp-cp-ep-dp-pp"); the workload model is the request's model class, or the cost model's
// "llm-dense" for training and "inference" for replicas.
//
// The state overload keeps the ideal side of the estimate (ideal_job_comm: the same job alone
// on the ideal placement, which walks every rank of a job as large as the one placed) per
// thread, keyed by the state's cluster_key(), the node type of the first GPU, the plan and
// the workload class: all it depends on. place() asks for the same few shapes over and over.
#include <map>
#include <tuple>

#include "cost/compute.h"
#include "cost/job_comm.h"
#include "placement/placement.h"

namespace toposched {

namespace {
std::optional<ParallelPlan> plan_for(const JobRequest& r, int gpus) {
  ParallelPlan plan;
  if (r.workload == WorkloadKind::kTraining) {
    plan.tp = r.tp;
    plan.pp = r.pp;
    plan.cp = r.cp;
    plan.ep = r.ep;
    plan.dp = r.dp;
  } else {
    const int replica = r.replica_gpus > 0 ? r.replica_gpus : 1;
    plan.pp = replica % r.pp == 0 ? r.pp : 1;
    plan.tp = replica / plan.pp;
    plan.dp = gpus / replica;
  }
  if (plan.gpus() != gpus) return std::nullopt;
  return plan;
}

std::string class_of(const JobRequest& r) {
  return !r.model_class.empty()                  ? r.model_class
         : r.workload == WorkloadKind::kTraining ? "llm-dense"
                                                 : "inference";
}

// The ideal estimates of one thread, for one cluster at a time.
class IdealCache {
 public:
  using Key = std::tuple<std::uint32_t, int, int, int, int, int, std::string, std::string>;  // type, plan, order, class
  static constexpr std::size_t kMaxEntries = 4096;  // then it starts again: shapes are few

  // The cached ideal, or nullptr when it has none (and computing it fails: the caller then
  // takes estimate_job_comm's own fallback).
  const IdealJobComm* get(const AllocationState& s, GpuId like, const ParallelPlan& plan, const std::string& cls,
                          const WorkloadModel& model) {
    if (key_ != s.cluster_key() || entries_.size() >= kMaxEntries) {
      entries_.clear();
      key_ = s.cluster_key();
    }
    const Cluster& c = s.cluster();
    Key k{c.node_type_id(c.gpu_node(like)).value, plan.tp, plan.cp, plan.ep, plan.dp, plan.pp, plan.order, cls};
    if (auto it = entries_.find(k); it != entries_.end()) return &it->second;
    auto ideal = ideal_job_comm(c, plan, model, like);
    if (!ideal) return nullptr;
    return &entries_.emplace(std::move(k), std::move(*ideal)).first->second;
  }

 private:
  std::uint64_t key_ = 0;
  std::map<Key, IdealJobComm> entries_;
};

std::optional<CommPrediction> predict_with(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                           const JobRequest& r, const AllocationState* state) {
  if (gpus_by_rank.empty()) return std::nullopt;
  auto plan = plan_for(r, static_cast<int>(gpus_by_rank.size()));
  if (!plan) return std::nullopt;
  const std::string cls = class_of(r);
  auto model = workload_class(cls);
  if (!model) return std::nullopt;
  const IdealJobComm* ideal = nullptr;
  if (state && gpus_by_rank.front().valid() && gpus_by_rank.front().index() < cluster.gpu_count()) {
    thread_local IdealCache cache;
    ideal = cache.get(*state, gpus_by_rank.front(), *plan, cls, *model);
  }
  auto est = ideal ? estimate_job_comm(cluster, gpus_by_rank, *plan, *model, CostOptions{}, *ideal)
                   : estimate_job_comm(cluster, gpus_by_rank, *plan, *model);
  if (!est) return std::nullopt;
  const std::string& gpu_model = cluster.node_type(cluster.gpu_node(gpus_by_rank.front())).gpu_model;
  return CommPrediction{est->step_comm_us, est->ideal_step_comm_us,
                        compute_us_per_step(*model, cls, plan->tp, plan->pp, gpu_model)};
}

}  // namespace

std::optional<CommPrediction> predict_comm(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                           const JobRequest& r) {
  return predict_with(cluster, gpus_by_rank, r, nullptr);
}

std::optional<CommPrediction> predict_comm(const AllocationState& state, std::span<const GpuId> gpus_by_rank,
                                           const JobRequest& r) {
  return predict_with(state.cluster(), gpus_by_rank, r, &state);
}

}  // namespace toposched
