// What the simulation engine needs from the layers below, as two small interfaces:
//  - Placer: one placement policy over its own allocation state (gang placement: all of a
//    job's GPUs at once, in rank order, or nothing), release, and the fragmentation of the
//    free GPUs;
//  - CommModel: the communication slowdown of a job on given GPUs (>= 1: runtime on this
//    placement / runtime on an ideal one), and which shared uplinks it loads.
// make_placer / make_comm_model (placement_backend.cc) build them on the placement engine
// and the cost model; tests may supply their own. A Placer is used by one thread; a
// CommModel must be safe to call from several threads at once (it only reads the Cluster).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/trace.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched::sim {

class Placer {
 public:
  virtual ~Placer() = default;
  // The job's GPUs in rank order. A kInfeasible error means "not now" (the job waits); any
  // other error means the policy can never place this job (it is reported, not retried).
  virtual Result<std::vector<GpuId>> place(const SimJob& job, std::uint32_t job_index) = 0;
  virtual void release(std::uint32_t job_index) = 0;
  // 0 = every free GPU is usable by any job shape, towards 1 = free GPUs scattered.
  virtual double fragmentation() const = 0;
};

// One shared uplink a running job loads: `demand` in units of node uplinks it drives
// through switch `uplink` (the switch below the link), against that link's `capacity`.
struct UplinkUse {
  std::uint32_t uplink = 0;
  double demand = 0;
};

struct CommEstimate {
  double slowdown = 1.0;             // runtime factor of this placement alone (>= 1)
  double network_share = 0.0;        // fraction of the step spent on inter-node links (0..1)
  std::vector<UplinkUse> uplinks;    // shared links it loads, for contention
};

class CommModel {
 public:
  virtual ~CommModel() = default;
  virtual CommEstimate estimate(const SimJob& job, std::span<const GpuId> gpus) const = 0;
  // Capacity of each uplink id in the same units as UplinkUse::demand.
  virtual double uplink_capacity(std::uint32_t uplink) const = 0;
  virtual std::size_t uplink_count() const = 0;
};

// The policies make_placer accepts (the placement engine's registry), in its order.
std::vector<std::string> placer_names();
Result<std::unique_ptr<Placer>> make_placer(const Cluster& cluster, const std::string& policy, std::uint64_t seed);
// The cost model (estimate_job_comm) with a compute time per step from the job's FLOPs,
// and the uplink demand / capacity of the cost layer's contention model (contention.h).
std::unique_ptr<CommModel> make_comm_model(const Cluster& cluster);

// How a trace job communicates: its workload class (the trace's kind, else llm-dense when
// it has a TP/PP plan, else dp-vision) and its plan as the cost model wants it (EP carved
// out of DP). Exposed for tests and docs.
struct JobShape {
  std::string workload_class;
  int tp = 1, pp = 1, dp = 1, ep = 1;
};
JobShape job_shape(const SimJob& job, int gpus_per_node);
// Estimated compute time of one step (µs) of the job's workload class on `gpu_model`
// GPUs with that plan: dense training 6 x active parameters x tokens / (tp x pp) at 40% of
// the GPU's peak, ResNet-50 256 images per GPU, inference one memory-bound decode step.
double compute_us_per_step(const JobShape& shape, std::string_view gpu_model);

}  // namespace toposched::sim
