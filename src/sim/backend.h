// What the simulation engine needs from the layers below, as two small interfaces:
//  - Placer: one placement policy over its own allocation state (gang placement: all of a
//    job's GPUs at once, in rank order, or nothing), release, the GPUs stranded by
//    fragmentation and, optionally, reservations (where a waiting job would start once given
//    running jobs end, and placement around reserved GPUs) for topology-aware backfill;
//  - CommModel: the communication slowdown of a job on given GPUs (>= 1: runtime on this
//    placement / runtime on an ideal one), and which shared uplinks it loads.
// make_placer / make_comm_model (placement_backend.cc) build them on the placement engine
// and the cost model; tests may supply their own. A Placer is used by one thread; a
// CommModel must be safe to call from several threads at once (it only reads the Cluster).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cost/job_comm.h"
#include "sim/trace.h"
#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched::sim {

// Where a waiting job could start once some running jobs have ended (EASY backfill's
// reservation, placed with the policy itself rather than counted in GPUs).
struct Reservation {
  std::size_t finished = 0;            // how many of the running jobs, in end order, must end first
  std::vector<GpuId> gpus;             // the GPUs the job would get then
  std::size_t gpus_free_now = 0;       // how many of those are free already
};

class Placer {
 public:
  virtual ~Placer() = default;
  // The job's GPUs in rank order. A kInfeasible error means "not now" (the job waits); any
  // other error means the policy can never place this job (it is reported, not retried).
  virtual Result<std::vector<GpuId>> place(const SimJob& job, std::uint32_t job_index) = 0;
  virtual void release(std::uint32_t job_index) = 0;
  // The share of all GPUs that are free but unusable by a job of a typical size (0 = none
  // stranded; at most the share of GPUs that are free).
  virtual double fragmentation() const = 0;

  // Optional, for topology-aware backfill; placers without it get GPU-count reservations.
  virtual bool plans_reservations() const { return false; }
  // The first moment the policy could place `job`: the shortest prefix (at least
  // `min_finished` long) of `running_by_end` (running job indices, by estimated end) whose
  // ending lets the policy place it, and the GPUs it would then choose. The state is left
  // as it was. kInfeasible when even all of them ending is not enough.
  virtual Result<Reservation> reserve(const SimJob& job, std::uint32_t job_index,
                                      std::span<const std::uint32_t> running_by_end, std::size_t min_finished) {
    (void)job, (void)job_index, (void)running_by_end, (void)min_finished;
    return make_error(ErrorCode::kUnsupported, "this placer makes no reservations");
  }
  // place(), but leaving the GPUs in `keep_free` alone (another job's reservation).
  // `keep_free_version` names keep_free's content: the caller passes the same version only
  // with the same GPUs (a backfill pass asks for many jobs around one reservation), so the
  // placer can tell it is unchanged without comparing thousands of GPUs per call.
  virtual Result<std::vector<GpuId>> place_around(const SimJob& job, std::uint32_t job_index,
                                                  std::span<const GpuId> keep_free, std::uint64_t keep_free_version) {
    (void)job, (void)job_index, (void)keep_free, (void)keep_free_version;
    return make_error(ErrorCode::kUnsupported, "this placer makes no reservations");
  }
  // The engine has placed what it will at this event: drop any scratch state kept between
  // calls (the placement engine's placer keeps place_around's hold for the next call).
  virtual void end_pass() {}
};

// One shared uplink a running job loads: `demand` (GB/s in make_comm_model's model; any
// unit shared with uplink_capacity) it drives through switch `uplink` (the switch below the
// link), against that link's `capacity`.
// Overloaded links are shared max-min fairly; a job's share applies to all its links (its
// demand is taken as the largest of its uses).
struct UplinkUse {
  std::uint32_t uplink = 0;
  double demand = 0;
};

// What a job's step is made of on its GPUs, as fractions of the step (the cost model's
// estimate_job_comm): the pipeline bubble, and per parallel kind (kParallelKinds order: tp,
// cp, ep, dp, pp) the communication time and the part of it the step waits for; the rest
// is hidden behind compute by the per-kind overlap rules. Zeros without an estimate.
struct StepBreakdown {
  double bubble = 0;
  std::array<double, 5> comm{}, exposed{};
};

struct CommEstimate {
  double slowdown = 1.0;             // runtime factor of this placement alone (>= 1)
  double network_share = 0.0;        // fraction of the step spent on inter-node links (0..1)
  std::vector<UplinkUse> uplinks;    // shared links it loads, for contention
  StepBreakdown step;
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
// How reserve() reaches each probe's state (the live state with a prefix of the running
// jobs released). kKeptState (the simulator's): a probe state kept between calls and
// brought to each probe by the jobs that differ from the previous one. kFromScratch: a copy
// of the live state with the whole prefix released, per probe; slow, the reference the
// tests compare kKeptState with (the same reservations).
enum class ReservationProbes { kKeptState, kFromScratch };
Result<std::unique_ptr<Placer>> make_placer(const Cluster& cluster, const std::string& policy, std::uint64_t seed,
                                            ReservationProbes probes = ReservationProbes::kKeptState);
// The cost model (estimate_job_comm) with a compute time per step from the job's FLOPs
// (cost/compute.h), and the uplink demand / capacity of the cost layer's contention model
// (cost/contention.h: uplink_capacity_GBps, job_uplink_demand_GBps).
std::unique_ptr<CommModel> make_comm_model(const Cluster& cluster);

// How a trace job communicates: its workload class (the trace's kind, else llm-dense when
// it has a TP/PP plan, else dp-vision) and its plan: the cost model's and the job request's
// one ParallelPlan, so `dp` means what it means everywhere (gpus / (tp x cp x ep x pp); a
// trace's EP is carved out of its data-parallel width). Exposed for tests and docs.
struct JobShape {
  std::string workload_class;
  ParallelPlan plan;
};
JobShape job_shape(const SimJob& job, int gpus_per_node);
// Estimated compute time of one step (µs) of the job's workload class on `gpu_model`
// GPUs with that plan: the cost layer's compute_us_per_step (cost/compute.h).
double compute_us_per_step(const JobShape& shape, std::string_view gpu_model);
// The same for a job's own model and plan (a job file's): cost/compute.h's step_compute on
// the GPU's row of the hardware table (topology/hardware.h).
double model_compute_us_per_step(const WorkloadModel& model, const ParallelPlan& plan, std::string_view gpu_model);
// Dense BF16/FP16 tensor peak of one GPU (FLOP/s), from the hardware table.
double gpu_peak_flops(std::string_view gpu_model);

}  // namespace toposched::sim
