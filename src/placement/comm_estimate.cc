// predict_comm: the bridge from a placement to the cost model (src/cost/job_comm.h). The
// request's parallelism becomes a ParallelPlan in the same rank order the policies use
// ("tp-cp-ep-dp-pp"); the workload model is the request's model class, or the cost model's
// "llm-dense" for training and "inference" for replicas.
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

}  // namespace

std::optional<CommPrediction> predict_comm(const Cluster& cluster, std::span<const GpuId> gpus_by_rank,
                                           const JobRequest& r) {
  if (gpus_by_rank.empty()) return std::nullopt;
  auto plan = plan_for(r, static_cast<int>(gpus_by_rank.size()));
  if (!plan) return std::nullopt;
  std::string cls = !r.model_class.empty()                  ? r.model_class
                    : r.workload == WorkloadKind::kTraining ? "llm-dense"
                                                            : "inference";
  auto model = workload_class(cls);
  if (!model) return std::nullopt;
  auto est = estimate_job_comm(cluster, gpus_by_rank, *plan, *model);
  if (!est) return std::nullopt;
  const std::string& gpu_model = cluster.node_type(cluster.gpu_node(gpus_by_rank.front())).gpu_model;
  return CommPrediction{est->step_comm_us, est->ideal_step_comm_us,
                        compute_us_per_step(*model, cls, plan->tp, plan->pp, gpu_model)};
}

}  // namespace toposched
