// Binds the simulator's Placer and CommModel interfaces to the placement engine (the
// policy registry's decisions, place_job, on states the placement layer changes:
// AllocationLedger, whose only writer is apply() of Mutation records) and the cost model
// (estimate_job_comm).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "cost/compute.h"
#include "cost/contention.h"
#include "cost/job_comm.h"
#include "placement/allocation_state.h"
#include "placement/engine.h"
#include "placement/fragmentation.h"
#include "placement/job_request.h"
#include "placement/ledger.h"
#include "placement/placement.h"
#include "sim/backend.h"
#include "topology/mutex.h"
#include "topology/text.h"

namespace toposched::sim {

namespace {

// Where reserve() asks the policy: the placer's live state without place_around's hold,
// with some running jobs released ("ended"). It is kept from one probe (and one reserve
// call) to the next and brought to each probe's set of ended jobs by releasing and giving
// back only the jobs that differ from the previous probe's: between two reservations a
// handful of jobs start or end, while the prefix of running jobs a reservation ends is
// often hundreds of jobs long, which the live state used to release and give back on every
// call. A placement depends only on which GPUs are free (the free-GPU index's bucket order
// is not read by any search), so a probe here decides what the same probe on the live
// state did.
// It starts at the first reservation (start()), so placers that never reserve do not mirror.
// Invariant, once started: a GPU is free here iff it is free in the live state (hold aside)
// or belongs to an ended job; every ended job is running in the live state.
class ProbeState {
 public:
  // Per job index: its GPUs in the live state (empty when not running).
  using LiveGpus = std::vector<std::vector<GpuId>>;

  explicit ProbeState(const Cluster& c) : state_(c) {}

  bool started() const { return started_; }
  // Starts mirroring `live` (without a hold), nothing ended.
  void start(const AllocationLedger& live) {
    state_.copy_from(live);
    started_ = true;
  }
  const AllocationLedger& ledger() const { return state_; }

  // The live state allocated `gpus` to job `id` (a job index): those GPUs were free there,
  // so they are free here.
  void on_allocate(const std::string& id, std::span<const GpuId> gpus) {
    if (started_) (void)state_.hold(id, gpus);
  }
  // The live state released job `index`.
  void on_release(std::uint32_t index, const std::string& id) {
    prefix_ = kNoPrefix;
    if (!started_) return;
    if (is_ended(index)) {
      unmark(index);
    } else {
      (void)state_.release_job(id);
    }
  }

  // Makes `jobs` (running in the live state) exactly the ended ones: gives back the ended
  // jobs not in it (their GPUs, as the live state holds them: `live[j]`, are free here), then
  // releases those of it not yet ended.
  void end_exactly(const LiveGpus& live, std::span<const std::uint32_t> jobs) {
    prefix_ = jobs.size();
    ++stamp_;
    for (std::uint32_t j : jobs) {
      if (j >= wanted_.size()) wanted_.resize(j + 1, 0);
      wanted_[j] = stamp_;
    }
    for (std::size_t i = 0; i < ended_.size();) {
      const std::uint32_t j = ended_[i];
      if (j < wanted_.size() && wanted_[j] == stamp_) {
        ++i;
        continue;
      }
      give_back(live, j);  // moves the last of ended_ to i
    }
    for (std::uint32_t j : jobs) {
      if (is_ended(j)) continue;
      end(j);
    }
  }

  // end_exactly(live, jobs.first(k)) where the previous call ended a prefix of the same
  // `jobs` (one reserve() call's probes: nothing started or ended in the live state
  // between them): ends or gives back only the jobs between the two prefixes, instead of
  // comparing every job of both with the ended set. Without such a previous call, it is
  // end_exactly itself.
  void end_prefix(const LiveGpus& live, std::span<const std::uint32_t> jobs, std::size_t k, bool same_jobs) {
    if (!same_jobs || prefix_ == kNoPrefix) return end_exactly(live, jobs.first(k));
    for (std::size_t i = prefix_; i < k; ++i) end(jobs[i]);
    for (std::size_t i = k; i < prefix_; ++i) give_back(live, jobs[i]);
    prefix_ = k;
  }

 private:
  static constexpr std::size_t kNoPrefix = ~std::size_t{0};

  // Releases running job j here and records it as ended (not running: nothing to end).
  void end(std::uint32_t j) {
    if (is_ended(j) || !state_.release_job(std::to_string(j))) return;
    if (j >= ended_pos_.size()) ended_pos_.resize(j + 1, kNotEnded);
    ended_pos_[j] = static_cast<std::uint32_t>(ended_.size());
    ended_.push_back(j);
  }
  // Gives ended job j its GPUs back (as the live state holds them).
  void give_back(const LiveGpus& live, std::uint32_t j) {
    if (!is_ended(j)) return;
    (void)state_.hold(std::to_string(j), live[j]);
    unmark(j);
  }
  // Drops ended job j from ended_ (the last entry takes its place).
  void unmark(std::uint32_t j) {
    const std::uint32_t pos = ended_pos_[j];
    ended_[pos] = ended_.back();
    ended_pos_[ended_[pos]] = pos;
    ended_.pop_back();
    ended_pos_[j] = kNotEnded;
  }

  static constexpr std::uint32_t kNotEnded = ~std::uint32_t{0};
  bool is_ended(std::uint32_t j) const { return j < ended_pos_.size() && ended_pos_[j] != kNotEnded; }

  AllocationLedger state_;
  bool started_ = false;
  std::vector<std::uint32_t> ended_;      // job indices released here, in no particular order
  std::vector<std::uint32_t> ended_pos_;  // per job index: its position in ended_, kNotEnded when not there
  std::vector<std::uint64_t> wanted_;     // per job index: stamp_ of the last end_exactly naming it
  std::uint64_t stamp_ = 0;
  // The ended jobs are the running ones of the first prefix_ of the last end_exactly's or
  // end_prefix's `jobs`; kNoPrefix after a release in the live state.
  std::size_t prefix_ = kNoPrefix;
};

// A FreedStateCheck moved along one list of running jobs: the jobs of a prefix of it freed.
class FreedPrefix {
 public:
  explicit FreedPrefix(std::unique_ptr<FreedStateCheck> check) : check_(std::move(check)) {}
  // The check's answer once the first k of `jobs` have ended (`gpus_of(j)`: job j's GPUs);
  // kNotKnown without a check.
  template <class GpusOf>
  FreedStateCheck::Answer answer_after(std::span<const std::uint32_t> jobs, std::size_t k, GpusOf&& gpus_of) {
    if (!check_) return FreedStateCheck::Answer::kNotKnown;
    for (; freed_ < k; ++freed_) check_->free_gpus(gpus_of(jobs[freed_]));
    for (; freed_ > k; --freed_) check_->unfree_gpus(gpus_of(jobs[freed_ - 1]));
    return check_->answer();
  }

 private:
  std::unique_ptr<FreedStateCheck> check_;
  std::size_t freed_ = 0;  // the first freed_ jobs of the list are freed in check_
};

class RegistryPlacer final : public Placer {
 public:
  RegistryPlacer(const Cluster& c, const PlacementPolicy& p, std::uint64_t seed, ReservationProbes probes)
      : ledger_(c), probe_(c), probes_(probes), policy_(p), seed_(seed), sizes_(default_job_sizes()) {
    int max_gpn = 1;
    for (std::size_t n = 0; n < c.node_count(); ++n)
      max_gpn = std::max(max_gpn, c.node_gpu_count(NodeId(static_cast<std::uint32_t>(n))));
    gpus_per_node_ = max_gpn;
    for (std::size_t n = 0; n < c.node_count(); ++n)
      models_.push_back(ascii_lower(c.node_type(NodeId(static_cast<std::uint32_t>(n))).gpu_model));
  }

  // The CLI's place transaction (placement/engine.h's place_job): normalise, tier handling,
  // the policy, check_placement, allocate.
  Result<std::vector<GpuId>> place(const SimJob& job, std::uint32_t index) override {
    drop_hold();
    return place_now(job, index);
  }

  void release(std::uint32_t index) override {
    drop_hold();
    const std::string id = std::to_string(index);
    if (ledger_.release_job(id)) probe_.on_release(index, id);
    ++jobs_version_;
    if (index < job_gpus_.size()) std::vector<GpuId>().swap(job_gpus_[index]);
  }

  void end_pass() override { drop_hold(); }

  // Policies that fit a job on any free GPUs get exact GPU-count reservations instead.
  bool plans_reservations() const override { return !policy_.fits_any_free_gpus(); }

  // Asks the policy on the probe state (the live state with the first k running jobs, in
  // end order, released), at galloping then bisecting prefix lengths: O(log n) policy calls,
  // assuming that more free GPUs never make a placement impossible.
  // long: the probe's ways (prefix sum, the policy's counts, the probe state) share the list and the search
  Result<Reservation> reserve(const SimJob& job, std::uint32_t index, std::span<const std::uint32_t> running_by_end,
                              std::size_t min_finished) override {
    drop_hold();
    if (!probe_.started()) probe_.start(ledger_);
    const AllocationState& state = ledger_.state();
    const PlaceRequest r = request(job, index);
    // The first probe brings the kept state from the previous call's last probe; the later
    // ones move along this call's list only.
    bool probed = false;
    auto end_first = [&](std::size_t k) {
      probe_.end_prefix(job_gpus_, running_by_end, k, probed);
      probed = true;
    };
    // GPUs free once the first k have ended, from a prefix sum: a probe with fewer free GPUs
    // than the job needs fails in choose_gpus' first check, so it is answered without
    // releasing jobs or asking the policy (the same answers, in the same probe sequence).
    std::vector<std::int64_t> free_after{state.total_free_gpus()};
    auto enough = [&](std::size_t k) {
      while (free_after.size() <= k) {
        const std::size_t i = free_after.size() - 1;
        free_after.push_back(free_after.back() + static_cast<std::int64_t>(gpus_of(running_by_end[i]).size()));
      }
      return free_after[k] >= job.gpus;
    };
    // The policy on the probe state with the first k ended.
    auto decide_after = [&](std::size_t k) -> Result<std::vector<GpuId>> {
      if (probes_ == ReservationProbes::kFromScratch) {
        AllocationLedger scratch = ledger_;
        for (std::uint32_t j : running_by_end.first(k)) (void)scratch.release_job(std::to_string(j));
        TOPOSCHED_TRY(p, scratch.decide(r, PlaceDetail::kGpusOnly));
        return std::move(p.gpus_by_rank);
      }
      end_first(k);
      TOPOSCHED_TRY(p, probe_.ledger().decide(r, PlaceDetail::kGpusOnly));
      return std::move(p.gpus_by_rank);
    };
    // The policy's count-based answer (kKeptState only: kFromScratch stays the reference that
    // asks the policy on every probe), moved along the list without building the probe state:
    // a probe it answers changes nothing. Where it says "fits", the probe returns no GPUs,
    // and the policy is asked for them once the search has settled on its answer.
    FreedPrefix room(probes_ == ReservationProbes::kKeptState ? freed_state_check(state, r) : nullptr);
    auto probe = [&](std::size_t k) -> Result<std::vector<GpuId>> {
      if (!enough(k))
        return make_error(ErrorCode::kInfeasible,
                          fmt::format("needs {} GPUs; only {} would be free", job.gpus, free_after[k]));
      switch (room.answer_after(running_by_end, k, [&](std::uint32_t j) { return gpus_of(j); })) {
        case FreedStateCheck::Answer::kFails:
          return make_error(ErrorCode::kInfeasible, "no room for it once those jobs end (the policy's count)");
        case FreedStateCheck::Answer::kFits:
          return std::vector<GpuId>{};
        case FreedStateCheck::Answer::kNotKnown:
          break;
      }
      return decide_after(k);
    };
    const std::size_t n = running_by_end.size();
    std::size_t lo = std::min(min_finished, n);  // fails, unless it is the answer
    Result<std::vector<GpuId>> best = probe(lo);
    std::size_t found = lo;
    if (!best) {
      for (std::size_t step = 1, hi = lo; hi < n; step *= 2) {
        hi = std::min(n, lo + step);
        if (auto got = probe(hi)) {
          best = std::move(got);
          found = hi;
          break;
        }
        lo = hi;
      }
      while (best && found - lo > 1) {
        std::size_t mid = lo + (found - lo) / 2;
        if (auto got = probe(mid)) {
          best = std::move(got);
          found = mid;
        } else {
          lo = mid;
        }
      }
    }
    if (best && best->empty()) best = decide_after(found);  // counted as fitting: the policy's GPUs
    if (!best) return tl::unexpected(best.error());
    Reservation out;
    out.finished = found;
    out.gpus = std::move(*best);
    for (GpuId g : out.gpus) out.gpus_free_now += state.gpu_free(g) ? 1 : 0;
    return out;
  }

  // The reserved GPUs that are free now are held by a pseudo job while the policy decides.
  // The hold stays in place for the next place_around with the same reserved GPUs (a
  // backfill pass asks for many jobs in a row): until then only place_around ran, whose
  // starts cannot take held GPUs, and nothing was released, so the held set is exactly the
  // one that call would build. Every other entry point (and end_pass) drops it first, so
  // they see the state without it. The policies read the free counters and the free-GPU
  // index by node id, never the order of a bucket's list, so the different sequence of
  // allocate/release calls leaves every decision as it was (docs/design.md, "Simulation at
  // 100,000 GPUs").
  Result<std::vector<GpuId>> place_around(const SimJob& job, std::uint32_t index, std::span<const GpuId> keep_free,
                                          std::uint64_t keep_free_version) override {
    // A shape that failed around the same reserved GPUs with the same running jobs fails
    // again (the held set, and so the whole state, is the same): no hold to build for it.
    if (around_jobs_ != jobs_version_ || around_version_ != keep_free_version) {
      around_failed_.clear();
      around_jobs_ = jobs_version_;
      around_version_ = keep_free_version;
    }
    if (!policy_.randomized() && std::find(around_failed_.begin(), around_failed_.end(), job) != around_failed_.end())
      return make_error(ErrorCode::kInfeasible, "a job of the same shape cannot be placed around these GPUs now");
    // The same version is the same GPUs (backend.h); a new version with the same GPUs keeps
    // the hold too, after one comparison. hold_for_ outlives a dropped hold, so the next
    // pass around the same reservation (the same version) only builds the hold again.
    const bool same_gpus =
        hold_for_known_ && (keep_free_version == hold_version_ ||
                            std::equal(keep_free.begin(), keep_free.end(), hold_for_.begin(), hold_for_.end()));
    if (!same_gpus) {
      drop_hold();
      hold_for_.assign(keep_free.begin(), keep_free.end());
      hold_for_known_ = true;
    }
    hold_version_ = keep_free_version;
    if (!holding_) {
      hold_scratch_.clear();
      for (GpuId g : hold_for_)
        if (ledger_.state().gpu_free(g)) hold_scratch_.push_back(g);
      if (!hold_scratch_.empty()) (void)ledger_.hold(kHold, hold_scratch_);
      holding_ = true;
    }
    auto placed = place_now(job, index);
    if (!placed && placed.error().code == ErrorCode::kInfeasible && !policy_.randomized())
      around_failed_.emplace_back(job);
    return placed;
  }

  double fragmentation() const override {
    auto share = [&](const AllocationState& s) {
      const FragmentationReport f = toposched::fragmentation(s, sizes_);
      return f.total_gpus > 0 ? f.expected_unusable_gpus / static_cast<double>(f.total_gpus) : 0;
    };
    if (!holding_ || !ledger_.state().has_job(kHold)) return share(ledger_.state());
    AllocationLedger without = ledger_;  // the engine ends its pass first: not reached from it
    (void)without.release_job(kHold);
    return share(without.state());
  }

 private:
  static constexpr std::string_view kHold = "reservation";

  Result<std::vector<GpuId>> place_now(const SimJob& job, std::uint32_t index) {
    if (failed_stamp_ != ledger_.state().stamp()) {
      failed_.clear();
      failed_stamp_ = ledger_.state().stamp();
    }
    const bool same_shape_same_answer = !policy_.randomized();
    if (same_shape_same_answer && std::find(failed_.begin(), failed_.end(), job) != failed_.end())
      return make_error(ErrorCode::kInfeasible, "a job of the same shape cannot be placed on this state");
    auto placed = ledger_.place(request(job, index), PlaceDetail::kGpusOnly);
    if (!placed) {
      if (same_shape_same_answer && placed.error().code == ErrorCode::kInfeasible) failed_.emplace_back(job);
      return tl::unexpected(placed.error());
    }
    Placement& p = *placed;
    ++jobs_version_;
    probe_.on_allocate(p.job_id, p.gpus_by_rank);
    if (index >= job_gpus_.size()) job_gpus_.resize(index + 1);
    job_gpus_[index] = p.gpus_by_rank;
    return std::move(p.gpus_by_rank);
  }

  // The GPUs of job `index` in the live state (none when not running): ledger_.state().job_gpus
  // of its id, without building and hashing the id.
  std::span<const GpuId> gpus_of(std::uint32_t index) const {
    return index < job_gpus_.size() ? std::span<const GpuId>(job_gpus_[index]) : std::span<const GpuId>();
  }

  // The policy's FreedStateCheck for the request on `live` (nullptr when it has none, or the
  // request does not normalize: then the probes ask the policy, which says why).
  std::unique_ptr<FreedStateCheck> freed_state_check(const AllocationState& live, const PlaceRequest& r) const {
    auto norm = normalize(r.job, live.cluster());
    return norm ? policy_.freed_state_check(live, *norm) : nullptr;
  }

  void drop_hold() {
    if (!holding_) return;
    holding_ = false;
    if (ledger_.state().has_job(kHold)) (void)ledger_.release_job(kHold);
  }

  // The job as a front end would send it (`toposched place --job INDEX --gpus N --tp ...`).
  PlaceRequest request(const SimJob& job, std::uint32_t index) {
    PlaceRequest out;
    out.policy = std::string(policy_.name());
    JobRequest& r = out.job;
    r.job_id = std::to_string(index);
    r.gpus = job.gpus;
    JobShape shape = job_shape(job, gpus_per_node_);
    r.tp = shape.plan.tp;
    r.pp = shape.plan.pp;
    r.ep = shape.plan.ep;
    r.dp = 0;  // derived by normalize: gpus / (tp x ep x pp), shape.plan.dp
    r.model_class = shape.workload_class;
    if (shape.workload_class == "inference") {
      r.workload = WorkloadKind::kInference;
      r.replica_gpus = shape.plan.tp * shape.plan.pp;
    }
    r.gpu_model = usable_model(job.gpu_model);
    r.seed = seed_ + index;
    // Slurm's topology/block takes a bare GPU count (--gpus=K) from one base block: a front
    // end submits a job larger than a node as whole nodes (-N n --gpus-per-node g).
    if (policy_.name() == "slurm-block" && job.gpus > gpus_per_node_ && job.gpus % gpus_per_node_ == 0)
      r.gpus_per_node = gpus_per_node_;
    return out;
  }

  // The placement engine matches a model by substring; a trace's "A|B" alternatives or a
  // model absent from the cluster are dropped (the job may use any GPU).
  std::string usable_model(const std::string& model) {
    if (model.empty() || model.find('|') != std::string::npos) return {};
    auto it = model_ok_.find(model);
    if (it == model_ok_.end()) {
      std::string m = ascii_lower(model);
      bool found = std::any_of(models_.begin(), models_.end(),
                               [&](const std::string& x) { return x.find(m) != std::string::npos; });
      it = model_ok_.emplace(model, found).first;
    }
    return it->second ? model : std::string();
  }

  AllocationLedger ledger_;  // the live state: running jobs and place_around's hold
  ProbeState probe_;         // reserve()'s state: ledger_ less the hold, with some running jobs released
  ReservationProbes probes_;
  const PlacementPolicy& policy_;
  std::uint64_t seed_;
  std::vector<JobSizeWeight> sizes_;
  int gpus_per_node_ = 8;
  std::vector<std::string> models_;
  std::map<std::string, bool> model_ok_;
  bool holding_ = false;                      // place_around's hold is allocated (as job kHold, when non-empty)
  std::vector<GpuId> hold_for_;               // the reserved GPUs of the last place_around
  bool hold_for_known_ = false;               // hold_for_ was set by a place_around
  std::uint64_t hold_version_ = 0;            // their version (place_around's keep_free_version)
  std::vector<GpuId> hold_scratch_;           // the hold's GPUs (those of hold_for_ free), kept for its buffer
  std::vector<std::vector<GpuId>> job_gpus_;  // per job index: its GPUs while running, else none (gpus_of)
  // The shapes of the jobs that failed (kInfeasible) on the live state of stamp failed_stamp_
  // (AllocationState::stamp: equal stamps, equal content). request() is a function of a
  // job's shape (FailedShape's fields) and its index, which gives only the job id and the
  // seed; no decision reads the id, and only a randomized() policy the seed. So for the
  // others a job of a failed shape fails again on the same state, without asking: a backfill
  // pass asks for hundreds of jobs, of a few shapes, around one reservation.
  struct FailedShape {
    explicit FailedShape(const SimJob& j)
        : gpus(j.gpus), tp(j.tp), pp(j.pp), dp(j.dp), ep(j.ep), gpu_model(j.gpu_model), kind(j.kind) {}
    bool operator==(const SimJob& j) const {
      return gpus == j.gpus && tp == j.tp && pp == j.pp && dp == j.dp && ep == j.ep && gpu_model == j.gpu_model &&
             kind == j.kind;
    }
    int gpus, tp, pp, dp, ep;
    std::string gpu_model, kind;
  };
  std::uint64_t failed_stamp_ = 0;
  std::vector<FailedShape> failed_;
  // The same for place_around, keyed by the running jobs (jobs_version_, counting starts and
  // ends) and the reserved GPUs' version instead of the stamp, which the hold changes: a pass
  // around the same reservation with nothing started or ended since needs no hold for them.
  std::uint64_t jobs_version_ = 0;
  std::uint64_t around_jobs_ = ~std::uint64_t{0}, around_version_ = 0;
  std::vector<FailedShape> around_failed_;
};

// The estimate's step as fractions (sim/backend.h's StepBreakdown).
StepBreakdown step_breakdown(const JobCommEstimate& est) {
  StepBreakdown b;
  if (!(est.step_us > 0)) return b;
  b.bubble = est.bubble_us / est.step_us;
  for (const GroupComm& g : est.groups)
    for (std::size_t k = 0; k < b.comm.size(); ++k)
      if (g.kind == kParallelKinds[k]) {
        b.comm[k] = g.time_us / est.step_us;
        b.exposed[k] = g.exposed_us / est.step_us;
      }
  return b;
}

class CostCommModel final : public CommModel {
 public:
  explicit CostCommModel(const Cluster& c) : c_(c) {
    int max_gpn = 1;
    for (std::size_t n = 0; n < c.node_count(); ++n)
      max_gpn = std::max(max_gpn, c.node_gpu_count(NodeId(static_cast<std::uint32_t>(n))));
    gpus_per_node_ = max_gpn;
    // The cost layer's uplink model (cost/contention.h), in GB/s.
    capacity_.resize(c.switch_count());
    for (std::size_t s = 0; s < c.switch_count(); ++s)
      capacity_[s] = uplink_capacity_GBps(c, SwitchId(static_cast<std::uint32_t>(s)));
    for (std::string_view name : workload_class_names()) {
      auto m = workload_class(name);
      if (m) models_.emplace(std::string(name), *m);
    }
  }

  CommEstimate estimate(const SimJob& job, std::span<const GpuId> gpus) const override {
    CommEstimate out;
    if (gpus.empty()) return out;
    JobShape shape = job_shape(job, gpus_per_node_);
    auto mit = models_.find(shape.workload_class);
    if (mit == models_.end()) return out;
    WorkloadModel model = mit->second;
    std::string_view gpu_model = c_.node_type(c_.gpu_node(gpus[0])).gpu_model;
    model.compute_us_per_step = compute_us_per_step(shape, gpu_model);
    ParallelPlan plan = shape.plan;
    if (plan.gpus() != static_cast<int>(gpus.size())) {
      plan = ParallelPlan{};
      plan.dp = static_cast<int>(gpus.size());
    }
    auto est = estimate(gpus, plan, model, shape.workload_class);
    if (est) {
      out.slowdown = std::max(1.0, est->step_slowdown);
      const double step = est->step_us;
      out.network_share = step > 0 ? std::clamp(est->exposed_comm_us / step, 0.0, 1.0) : 0.0;
      out.step = step_breakdown(*est);
    }
    // Uplinks: a job crosses the uplink of every switch that holds some but not all of its
    // nodes, with the cost layer's demand (zero inside one node or accelerator domain).
    const double demand = job_uplink_demand_GBps(c_, gpus);
    if (demand <= 0) return out;
    std::vector<std::uint32_t> nodes;
    nodes.reserve(gpus.size());
    for (GpuId g : gpus) nodes.push_back(c_.gpu_node(g).value);
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    std::map<std::uint32_t, int> under;  // switch -> job nodes below it
    for (std::uint32_t n : nodes)
      for (SwitchId s = c_.node_switch(NodeId(n)); s.valid(); s = c_.switch_parent(s)) ++under[s.value];
    for (auto [s, count] : under)
      if (static_cast<std::size_t>(count) < nodes.size()) out.uplinks.push_back({s, demand});
    return out;
  }

  double uplink_capacity(std::uint32_t uplink) const override {
    return uplink < capacity_.size() ? capacity_[uplink] : 0;
  }
  std::size_t uplink_count() const override { return capacity_.size(); }

 private:
  // estimate_job_comm with its ideal side (ideal_job_comm: the job alone on an ideal
  // placement) computed once per (workload class, compute time, node type of the first GPU,
  // plan) and kept: it depends on nothing else, so every later job of the same shape reuses
  // it instead of walking the ranks of a second placement. The same answer as
  // estimate_job_comm(c_, gpus, plan, model) (tests/sim/comm_cache_test.cc); when the
  // ideal cannot be computed, that call itself (its fallback) runs.
  Result<JobCommEstimate> estimate(std::span<const GpuId> gpus, const ParallelPlan& plan, const WorkloadModel& model,
                                   const std::string& workload_class) const {
    const IdealKey key{workload_class,
                       model.compute_us_per_step,
                       c_.node_type_id(c_.gpu_node(gpus[0])).value,
                       plan.tp,
                       plan.pp,
                       plan.ep,
                       plan.dp,
                       plan.cp};
    std::optional<IdealJobComm> ideal;
    {
      MutexLock lock(ideal_mu_);
      if (auto it = ideals_.find(key); it != ideals_.end()) ideal = it->second;
    }
    if (!ideal) {
      auto fresh = ideal_job_comm(c_, plan, model, gpus[0]);
      if (!fresh) return estimate_job_comm(c_, gpus, plan, model);
      ideal = *fresh;
      MutexLock lock(ideal_mu_);
      ideals_.emplace(key, *fresh);
    }
    return estimate_job_comm(c_, gpus, plan, model, CostOptions{}, *ideal);
  }

  using IdealKey = std::tuple<std::string, double, std::uint32_t, int, int, int, int, int>;

  const Cluster& c_;
  mutable Mutex ideal_mu_;
  mutable std::map<IdealKey, IdealJobComm> ideals_ GUARDED_BY(ideal_mu_);  // see estimate()
  int gpus_per_node_ = 8;
  std::vector<double> capacity_;
  std::map<std::string, WorkloadModel> models_;
};

}  // namespace

JobShape job_shape(const SimJob& job, int gpus_per_node) {
  JobShape s;
  const int g = std::max(job.gpus, 1);
  const bool has_plan = job.tp > 0 || job.pp > 0;
  s.workload_class = !job.kind.empty() ? job.kind : has_plan ? "llm-dense" : "dp-vision";
  ParallelPlan& p = s.plan;
  int width = g;  // the data-parallel width before EP is carved out of it
  if (has_plan || job.dp > 0) {
    p.tp = std::max(job.tp, 1);
    p.pp = std::max(job.pp, 1);
    width = std::max(1, g / (p.tp * p.pp));
  } else if (s.workload_class != "dp-vision") {
    // A class without a plan: TP within a node, DP across.
    p.tp = std::min(g, gpus_per_node);
    while (g % p.tp != 0) --p.tp;
    width = g / p.tp;
  }
  if (p.tp * p.pp * width != g) {  // an inconsistent plan: fall back to pure DP
    p.tp = p.pp = 1;
    width = g;
  }
  if (job.ep > 1 && width % job.ep == 0) p.ep = job.ep;
  p.dp = width / p.ep;
  return s;
}

double compute_us_per_step(const JobShape& shape, std::string_view gpu_model) {
  auto model = workload_class(shape.workload_class);
  if (!model) return 0;
  return model_compute_us_per_step(*model, shape.plan, gpu_model);
}

double model_compute_us_per_step(const WorkloadModel& m, const ParallelPlan& plan, std::string_view gpu_model) {
  return step_compute(m, plan, gpu_datasheet_or_default(gpu_model)).total_us;
}

double gpu_peak_flops(std::string_view gpu_model) { return gpu_datasheet_or_default(gpu_model).bf16_dense_flops; }

std::vector<std::string> placer_names() {
  std::vector<std::string> out;
  for (const PlacementPolicy* p : placement_policies()) out.emplace_back(p->name());
  return out;
}

Result<std::unique_ptr<Placer>> make_placer(const Cluster& cluster, const std::string& policy, std::uint64_t seed,
                                            ReservationProbes probes) {
  auto p = find_policy(policy);
  if (!p) return tl::unexpected(p.error());
  return std::unique_ptr<Placer>(std::make_unique<RegistryPlacer>(cluster, **p, seed, probes));
}

std::unique_ptr<CommModel> make_comm_model(const Cluster& cluster) { return std::make_unique<CostCommModel>(cluster); }

}  // namespace toposched::sim
