#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <span>

#include <fmt/format.h>

#include "cost/contention.h"
#include "sim/power.h"

namespace toposched::sim {

const Registry<Discipline>& disciplines() {
  static const Registry<Discipline> kDisciplines(
      "queue discipline",
      {{"fifo", "in submit order; the head blocks everything behind it", Discipline::kFifo},
       {"easy-backfill", "fifo, but later jobs may start when they do not delay the head's reservation",
        Discipline::kEasyBackfill, {"backfill"}},
       {"priority", "by priority (high first), then submit order; the head blocks", Discipline::kPriority}});
  return kDisciplines;
}

Result<Discipline> parse_discipline(std::string_view name) { return disciplines().find(name); }

std::string_view discipline_name(Discipline d) {
  switch (d) {
    case Discipline::kFifo: return "fifo";
    case Discipline::kEasyBackfill: return "easy-backfill";
    case Discipline::kPriority: return "priority";
  }
  return "fifo";
}

namespace {

struct Event {
  double t;
  std::uint64_t seq;
  std::uint32_t job;
  std::uint32_t version;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// GPUs of the cluster whose model matches a job's gpu_model ("A|B" lists alternatives).
class ModelCapacity {
 public:
  explicit ModelCapacity(const Cluster& c) {
    for (std::size_t n = 0; n < c.node_count(); ++n) {
      const NodeType& t = c.node_type(NodeId(static_cast<std::uint32_t>(n)));
      by_model_[t.gpu_model] += static_cast<std::size_t>(t.gpu_count);
    }
    total_ = c.gpu_count();
  }
  // GPUs the job may use: of its models when any exists in the cluster, else all.
  std::size_t for_job(const std::string& models) {
    if (models.empty()) return total_;
    auto it = cache_.find(models);
    if (it != cache_.end()) return it->second;
    std::size_t n = 0;
    std::size_t start = 0;
    while (start <= models.size()) {
      std::size_t bar = models.find('|', start);
      if (bar == std::string::npos) bar = models.size();
      auto m = by_model_.find(models.substr(start, bar - start));
      if (m != by_model_.end()) n += m->second;
      start = bar + 1;
    }
    if (n == 0) n = total_;
    cache_.emplace(models, n);
    return n;
  }

 private:
  std::map<std::string, std::size_t> by_model_;
  std::map<std::string, std::size_t> cache_;
  std::size_t total_ = 0;
};

class Engine {
 public:
  Engine(const Cluster& cluster, const Trace& trace, Placer& placer, const CommModel& comm, const EngineOptions& o)
      : cluster_(cluster), trace_(trace), placer_(placer), comm_(comm), o_(o), capacity_(cluster) {
    std::size_t n = trace.jobs.size();
    res_.jobs.resize(n);
    remaining_.assign(n, 0);
    rate_.assign(n, 1);
    last_update_.assign(n, 0);
    version_.assign(n, 0);
    running_.assign(n, 0);
    affected_stamp_.assign(n, std::numeric_limits<std::uint64_t>::max());
    failed_epoch_.assign(n, std::numeric_limits<std::uint64_t>::max());
    failed_around_.assign(n, std::numeric_limits<std::uint64_t>::max());
    est_.resize(n);
    uses_.resize(n);
    end_key_.resize(n);
    estimate_.resize(n);
    for (std::size_t j = 0; j < n; ++j) {
      const SimJob& job = trace.jobs[j];
      estimate_[j] = job.estimate_s > 0 ? job.estimate_s : job.duration_s * o.estimate_factor;
    }
    uplink_load_.assign(comm.uplink_count(), 0);
    uplink_jobs_.resize(comm.uplink_count());
    link_dirty_.assign(comm.uplink_count(), 0);
    link_stamp_.assign(comm.uplink_count(), 0);
    share_.assign(n, 1.0);
    job_stamp_.assign(n, 0);
    job_local_.assign(n, 0);
    free_ = cluster.gpu_count();
    res_.cluster_gpus = cluster.gpu_count();
    job_idle_w_.assign(n, 0);
    node_power_.reserve(cluster.node_count());
    for (std::size_t i = 0; i < cluster.node_count(); ++i) {
      NodeId node(static_cast<std::uint32_t>(i));
      node_power_.push_back(gpu_power(cluster.node_type(node)));
      free_idle_w_ += node_power_.back().idle_w * cluster.node_gpu_count(node);
    }
    frag_every_ = std::max<std::size_t>(1, 2 * n / std::max<std::size_t>(o.timeline_points, 1));
  }

  Result<SimulationResult> run() {
    const auto& jobs = trace_.jobs;
    std::size_t n = jobs.size();
    if (n == 0) return std::move(res_);
    now_ = jobs.front().submit_s;
    res_.first_submit_s = now_;
    std::size_t next = 0;
    std::size_t done = 0, last_report = 0;
    while (next < n || !heap_.empty()) {
      while (!heap_.empty() && heap_.front().version != version_[heap_.front().job]) pop_event();
      double t_arr = next < n ? jobs[next].submit_s : std::numeric_limits<double>::infinity();
      double t_fin = heap_.empty() ? std::numeric_limits<double>::infinity() : heap_.front().t;
      double t = std::min(t_arr, t_fin);
      if (!std::isfinite(t)) break;
      advance_to(t);
      // Finishes first, so their GPUs are free for the jobs that arrive at the same time.
      while (!heap_.empty()) {
        const Event e = heap_.front();
        if (e.version != version_[e.job]) {
          pop_event();
          continue;
        }
        if (e.t > now_) break;
        pop_event();
        finish(e.job);
        ++done;
      }
      while (next < n && jobs[next].submit_s <= now_) {
        arrive(static_cast<std::uint32_t>(next));
        if (!res_.jobs[next].placed && !res_.jobs[next].never_placed_reason.empty()) ++done;
        ++next;
      }
      done += schedule();
      placer_.end_pass();
      refresh_affected();
      ++res_.events;
      record_change();
      if (o_.progress && done - last_report >= std::max<std::size_t>(1, n / 100)) {
        last_report = done;
        o_.progress(static_cast<double>(done) / static_cast<double>(n));
      }
    }
    // Whatever is still queued could never start (e.g. the policy refuses it even when idle).
    for (auto [key, j] : queue_) {
      res_.jobs[j].never_placed_reason = "still queued when the simulation ended";
    }
    res_.last_end_s = now_;
    build_timeline();
    if (o_.progress) o_.progress(1.0);
    return std::move(res_);
  }

 private:
  void advance_to(double t) {
    double dt = t - now_;
    if (dt > 0) {
      busy_gpu_seconds_ += dt * static_cast<double>(cluster_.gpu_count() - free_);
      res_.busy_gpu_seconds = busy_gpu_seconds_;
      // queue_ holds the jobs that waited during [now_, t): arrivals at t join after this.
      if (!queue_.empty()) res_.idle_gpu_seconds_queued += dt * static_cast<double>(free_);
      (queue_.empty() ? res_.idle_energy_j_no_demand : res_.idle_energy_j_queued) += dt * std::max(0.0, free_idle_w_);
    }
    now_ = t;
  }

  void pop_event() {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<Event>());
    heap_.pop_back();
  }

  void record_change() {
    changes_.push_back({now_, static_cast<double>(cluster_.gpu_count() - free_), static_cast<double>(queue_.size()), 0});
    if (res_.events % frag_every_ == 0) frag_samples_.emplace_back(now_, placer_.fragmentation());
  }

  void arrive(std::uint32_t j) {
    const SimJob& job = trace_.jobs[j];
    std::size_t cap = capacity_.for_job(job.gpu_model);
    if (static_cast<std::size_t>(job.gpus) > cap) {
      res_.jobs[j].never_placed_reason = fmt::format("asks for {} GPUs, the cluster has {}{}", job.gpus, cap,
                                                     job.gpu_model.empty() ? "" : " of model " + job.gpu_model);
      return;
    }
    int key = o_.discipline == Discipline::kPriority ? -job.priority : 0;
    queue_.emplace(std::make_pair(key, j), j);
  }

  // Starts job j if the policy places it now; `around` keeps the head's reserved GPUs free.
  bool try_start(std::uint32_t j, bool around = false) {
    const SimJob& job = trace_.jobs[j];
    if (static_cast<std::size_t>(job.gpus) > free_) return false;
    // A job that did not fit cannot fit before some GPUs are released (starts only take GPUs).
    if (failed_epoch_[j] == release_epoch_) return false;
    if (around && failed_around_[j] == reservation_gen_) return false;
    auto gpus = around ? placer_.place_around(job, j, reservation_.gpus, reservation_gen_) : placer_.place(job, j);
    if (!gpus) {
      if (gpus.error().code != ErrorCode::kInfeasible) permanent_error_ = gpus.error().message;
      (around ? failed_around_[j] = reservation_gen_ : failed_epoch_[j] = release_epoch_);
      return false;
    }
    JobOutcome& out = res_.jobs[j];
    out.placed = true;
    running_[j] = 1;
    ++running_count_;
    out.start_s = now_;
    free_ -= static_cast<std::size_t>(job.gpus);
    std::vector<std::uint32_t> nodes;
    nodes.reserve(gpus->size());
    job_idle_w_[j] = 0;
    for (GpuId g : *gpus) {
      nodes.push_back(cluster_.gpu_node(g).value);
      const GpuPower& p = node_power_[nodes.back()];
      out.busy_w += p.busy_w;
      out.comm_w += p.comm_w;
      job_idle_w_[j] += p.idle_w;
    }
    free_idle_w_ -= job_idle_w_[j];
    std::sort(nodes.begin(), nodes.end());
    out.nodes = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
    CommEstimate ce = comm_.estimate(job, *gpus);
    est_[j] = {std::max(1.0, ce.slowdown), std::clamp(ce.network_share, 0.0, 1.0)};
    out.placement_slowdown = est_[j].first;
    out.step = ce.step;
    remaining_[j] = job.duration_s;
    last_update_[j] = now_;
    uses_[j] = std::move(ce.uplinks);
    share_[j] = 1.0;
    for (const UplinkUse& u : uses_[j]) {
      double before = uplink_load_[u.uplink];
      uplink_load_[u.uplink] += u.demand;
      uplink_jobs_[u.uplink].push_back(j);
      mark_uplink(u.uplink, before);
    }
    mark(j);
    add_end(now_ + estimate_[j], j);
    return true;
  }

  void finish(std::uint32_t j) {
    const SimJob& job = trace_.jobs[j];
    JobOutcome& out = res_.jobs[j];
    out.end_s = now_;
    out.slowdown = (out.end_s - out.start_s) / job.duration_s;
    placer_.release(j);
    running_[j] = 0;
    --running_count_;
    ++release_epoch_;
    free_ += static_cast<std::size_t>(job.gpus);
    free_idle_w_ += job_idle_w_[j];
    ++version_[j];
    for (const UplinkUse& u : uses_[j]) {
      double before = uplink_load_[u.uplink];
      uplink_load_[u.uplink] -= u.demand;
      auto& v = uplink_jobs_[u.uplink];
      auto it = std::find(v.begin(), v.end(), j);
      if (it != v.end()) {
        *it = v.back();
        v.pop_back();
      }
      mark_uplink(u.uplink, before);
    }
    uses_[j].clear();
    drop_end(j);
  }

  // The running jobs by estimated end (ties in start order, as a multimap keeps them), as
  // sorted arrays: a reservation reads a prefix of the job indices as they are, instead of
  // walking a tree into a copy per reservation (the whole list, where the first prefix was
  // too short). A start or an end moves the entries after it (a few thousand at most).
  void add_end(double t, std::uint32_t j) {
    const std::uint64_t seq = ++end_seq_;
    const std::size_t pos =
        static_cast<std::size_t>(std::upper_bound(end_t_.begin(), end_t_.end(), t) - end_t_.begin());
    end_t_.insert(end_t_.begin() + static_cast<std::ptrdiff_t>(pos), t);
    end_seq_of_.insert(end_seq_of_.begin() + static_cast<std::ptrdiff_t>(pos), seq);
    end_job_.insert(end_job_.begin() + static_cast<std::ptrdiff_t>(pos), j);
    end_key_[j] = {t, seq};
  }
  void drop_end(std::uint32_t j) {
    const auto [t, seq] = end_key_[j];
    std::size_t pos =
        static_cast<std::size_t>(std::lower_bound(end_t_.begin(), end_t_.end(), t) - end_t_.begin());
    while (end_seq_of_[pos] != seq) ++pos;  // among the equal ends, by start order
    end_t_.erase(end_t_.begin() + static_cast<std::ptrdiff_t>(pos));
    end_seq_of_.erase(end_seq_of_.begin() + static_cast<std::ptrdiff_t>(pos));
    end_job_.erase(end_job_.begin() + static_cast<std::ptrdiff_t>(pos));
  }

  // An uplink whose load exceeds its capacity, before or after a change, reshapes the fair
  // shares of the jobs around it (on a non-blocking fabric none ever does, and nothing is
  // recomputed).
  void mark_uplink(std::uint32_t u, double load_before) {
    double cap = comm_.uplink_capacity(u);
    if (cap <= 0 || (!overloaded(u, load_before) && !overloaded(u, uplink_load_[u]))) return;
    if (link_dirty_[u]) return;
    link_dirty_[u] = 1;
    dirty_links_.push_back(u);
  }

  bool overloaded(std::uint32_t u, double load) const {
    double cap = comm_.uplink_capacity(u);
    return cap > 0 && load > cap * (1 + 1e-12);
  }

  // Max-min fair network shares (cost/contention.h's progressive filling) of the jobs
  // connected to the changed uplinks through overloaded ones; shares elsewhere cannot have
  // changed (max-min decomposes over connected components, and links that are not
  // overloaded never bind). Jobs whose share moved get a new rate.
  void recompute_shares() {
    if (dirty_links_.empty()) return;
    ++stamp_;
    comp_jobs_.clear();
    comp_links_.clear();
    auto add_job = [&](std::uint32_t j) {
      if (job_stamp_[j] == stamp_) return;
      job_stamp_[j] = stamp_;
      job_local_[j] = static_cast<std::uint32_t>(comp_jobs_.size());
      comp_jobs_.push_back(j);
    };
    for (std::uint32_t u : dirty_links_) {
      link_dirty_[u] = 0;
      for (std::uint32_t j : uplink_jobs_[u]) add_job(j);
    }
    dirty_links_.clear();
    for (std::size_t i = 0; i < comp_jobs_.size(); ++i)
      for (const UplinkUse& use : uses_[comp_jobs_[i]]) {
        std::uint32_t u = use.uplink;
        if (link_stamp_[u] == stamp_ || !overloaded(u, uplink_load_[u])) continue;
        link_stamp_[u] = stamp_;
        comp_links_.push_back(u);
        for (std::uint32_t k : uplink_jobs_[u]) add_job(k);
      }
    mm_demand_.assign(comp_jobs_.size(), 0);
    for (std::size_t i = 0; i < comp_jobs_.size(); ++i)
      for (const UplinkUse& use : uses_[comp_jobs_[i]]) mm_demand_[i] = std::max(mm_demand_[i], use.demand);
    mm_capacity_.resize(comp_links_.size());
    mm_begin_.assign(1, 0);
    mm_jobs_.clear();
    for (std::size_t l = 0; l < comp_links_.size(); ++l) {
      mm_capacity_[l] = comm_.uplink_capacity(comp_links_[l]);
      for (std::uint32_t k : uplink_jobs_[comp_links_[l]]) mm_jobs_.push_back(job_local_[k]);
      mm_begin_.push_back(static_cast<std::uint32_t>(mm_jobs_.size()));
    }
    max_min_rates(mm_demand_, mm_capacity_, mm_begin_, mm_jobs_, mm_ws_, mm_rate_);
    const std::vector<double>& rate = mm_rate_;
    const std::vector<double>& demand = mm_demand_;
    for (std::size_t i = 0; i < comp_jobs_.size(); ++i) {
      std::uint32_t j = comp_jobs_[i];
      double share = demand[i] > 0 ? std::clamp(rate[i] / demand[i], 1e-9, 1.0) : 1.0;
      if (std::abs(share - share_[j]) > 1e-12) {
        share_[j] = share;
        mark(j);
      }
    }
  }

  void mark(std::uint32_t j) {
    if (affected_stamp_[j] == refresh_round_) return;
    affected_stamp_[j] = refresh_round_;
    affected_.push_back(j);
  }

  void refresh_affected() {
    recompute_shares();
    // In job order, so the heap's tie-breaking sequence does not depend on marking order.
    std::sort(affected_.begin(), affected_.end());
    for (std::uint32_t j : affected_) {
      if (!running_[j]) continue;
      remaining_[j] = std::max(0.0, remaining_[j] - (now_ - last_update_[j]) * rate_[j]);
      last_update_[j] = now_;
      auto [slow, network_part] = est_[j];
      // The exposed communication stretches by 1 / share; compute does not.
      rate_[j] = 1.0 / (slow * (1.0 + network_part * (1.0 / share_[j] - 1.0)));
      ++version_[j];
      heap_.push_back({now_ + remaining_[j] / rate_[j], seq_++, j, version_[j]});
      std::push_heap(heap_.begin(), heap_.end(), std::greater<Event>());
    }
    if (heap_.size() > 4 * running_count_ + 4096) {
      std::erase_if(heap_, [&](const Event& e) { return e.version != version_[e.job]; });
      std::make_heap(heap_.begin(), heap_.end(), std::greater<Event>());
    }
    affected_.clear();
    ++refresh_round_;
  }

  // Starts what the discipline allows; returns how many jobs were dropped as unplaceable.
  std::size_t schedule() {
    std::size_t dropped = 0;
    while (!queue_.empty()) {
      auto head = queue_.begin();
      std::uint32_t j = head->second;
      permanent_error_.clear();
      if (try_start(j)) {
        queue_.erase(head);
        continue;
      }
      if (!permanent_error_.empty() || free_ == cluster_.gpu_count()) {
        res_.jobs[j].never_placed_reason =
            permanent_error_.empty() ? "the policy cannot place it even on an idle cluster" : permanent_error_;
        queue_.erase(head);
        ++dropped;
        continue;
      }
      break;
    }
    if (o_.discipline != Discipline::kEasyBackfill || queue_.size() < 2 || free_ == 0) return dropped;
    // EASY: the head's reservation from the running jobs' estimated ends. Counting GPUs
    // gives the first moment enough of them are free; a placer that plans reservations
    // then says when the policy can really place the head (whole nodes for its TP groups,
    // one leaf, ...) and on which GPUs, so backfill neither idles GPUs the head cannot use
    // yet nor takes the ones it will need.
    const std::uint32_t head_j = queue_.begin()->second;
    const std::size_t need = static_cast<std::size_t>(trace_.jobs[head_j].gpus);
    std::size_t avail = free_, by_count = 0;
    double shadow = std::numeric_limits<double>::infinity();
    std::size_t extra = 0;
    for (std::size_t i = 0; avail < need && i < end_job_.size(); ++i, ++by_count) {
      avail += static_cast<std::size_t>(trace_.jobs[end_job_[i]].gpus);
      shadow = std::max(end_t_[i], now_);
    }
    if (avail >= need) {
      if (by_count == 0) shadow = now_;
      extra = avail - need;
    } else {
      shadow = std::numeric_limits<double>::infinity();
    }
    bool around = false, planned = !placer_.plans_reservations() || avail < need;
    int looked = 0;
    for (auto it = std::next(queue_.begin()); it != queue_.end() && looked < o_.backfill_depth && free_ > 0;) {
      ++looked;
      std::uint32_t c = it->second;
      const SimJob& job = trace_.jobs[c];
      std::size_t g = static_cast<std::size_t>(job.gpus);
      if (!planned && g <= free_) {
        // Planned only when some job could start: the head just failed to start, so with
        // nothing ended it does not fit.
        planned = true;
        plan_reservation(head_j, std::max<std::size_t>(by_count, 1));
        if (reservation_.planned) {
          shadow = reservation_.shadow;
          extra = free_ - std::min(free_, reservation_.gpus_free_now);
          around = true;
        }
      }
      bool ends_in_time = now_ + estimate_[c] <= shadow;
      permanent_error_.clear();
      // A job that would still run at the shadow time may only use GPUs the head does not need.
      if (g <= free_ && (ends_in_time || g <= extra) && try_start(c, around && !ends_in_time)) {
        if (!ends_in_time) extra -= g;
        it = queue_.erase(it);
      } else if (!permanent_error_.empty()) {
        res_.jobs[c].never_placed_reason = permanent_error_;
        ++dropped;
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    return dropped;
  }

  // Where and when the head can start. Kept until a job ends or the head changes: the jobs
  // backfilled meanwhile either end before the shadow time or keep off the reserved GPUs,
  // so the plan stays valid (the count of reserved GPUs free now may only have dropped,
  // which makes `extra` conservative).
  void plan_reservation(std::uint32_t head_j, std::size_t min_finished) {
    HeadReservation& r = reservation_;
    if (r.release_epoch == release_epoch_ && r.head == head_j) return;
    r.release_epoch = release_epoch_;
    r.head = head_j;
    ++reservation_gen_;
    // The answer is usually near the count-based one: offer a prefix of the running jobs
    // first, all of them only if that is not enough.
    const std::size_t first_try = std::min(2 * min_finished + 16, end_job_.size());
    const std::span<const std::uint32_t> by_end(end_job_);
    auto got = placer_.reserve(trace_.jobs[head_j], head_j, by_end.first(first_try), min_finished);
    if (!got && first_try < by_end.size()) got = placer_.reserve(trace_.jobs[head_j], head_j, by_end, first_try);
    r.planned = got.has_value();
    if (!got) {
      r.gpus.clear();
      r.gpus_free_now = 0;
      return;
    }
    r.shadow = got->finished == 0 ? now_ : std::max(end_t_[got->finished - 1], now_);
    r.gpus = std::move(got->gpus);
    r.gpus_free_now = got->gpus_free_now;
  }

  void build_timeline() {
    std::size_t points = std::max<std::size_t>(o_.timeline_points, 1);
    double t0 = res_.first_submit_s, t1 = std::max(res_.last_end_s, t0 + 1e-9);
    double width = (t1 - t0) / static_cast<double>(points);
    res_.timeline.assign(points, {});
    std::vector<double> busy(points, 0), queued(points, 0);
    // Piecewise-constant values between change points, integrated per bucket.
    for (std::size_t i = 0; i + 1 < changes_.size(); ++i) {
      double a = changes_[i].t, b = changes_[i + 1].t;
      while (a < b) {
        std::size_t k = std::min(points - 1, static_cast<std::size_t>(std::max(0.0, a - t0) / width));
        double edge = t0 + width * static_cast<double>(k + 1);
        if (edge <= a && k + 1 < points) edge = t0 + width * static_cast<double>(++k + 1);  // a sits on a boundary
        edge = k + 1 == points ? b : std::min(b, edge);
        if (edge <= a) edge = b;
        busy[k] += changes_[i].busy_gpus * (edge - a);
        queued[k] += changes_[i].queued_jobs * (edge - a);
        a = edge;
      }
    }
    std::vector<double> frag_sum(points, 0);
    std::vector<int> frag_n(points, 0);
    double frag_total = 0;
    for (auto [t, f] : frag_samples_) {
      std::size_t k = std::min(points - 1, static_cast<std::size_t>(std::max(0.0, t - t0) / width));
      frag_sum[k] += f;
      ++frag_n[k];
      frag_total += f;
    }
    // The mean over time: each sample holds until the next one (the last until the run
    // ends), as utilisation is integrated, so a burst of short-lived states does not weigh
    // more than a long steady one.
    double weighted = 0, span = 0;
    for (std::size_t i = 0; i < frag_samples_.size(); ++i) {
      const double until = i + 1 < frag_samples_.size() ? frag_samples_[i + 1].first : res_.last_end_s;
      const double dt = std::max(0.0, until - frag_samples_[i].first);
      weighted += frag_samples_[i].second * dt;
      span += dt;
    }
    res_.fragmentation_mean = span > 0                  ? weighted / span
                              : frag_samples_.empty() ? 0
                                                      : frag_total / static_cast<double>(frag_samples_.size());
    double last_frag = 0;
    for (std::size_t k = 0; k < points; ++k) {
      TimelinePoint& p = res_.timeline[k];
      p.t = t0 + width * static_cast<double>(k + 1);
      p.busy_gpus = busy[k] / width;
      p.queued_jobs = queued[k] / width;
      if (frag_n[k] > 0) last_frag = frag_sum[k] / frag_n[k];
      p.fragmentation = last_frag;
    }
  }

  const Cluster& cluster_;
  const Trace& trace_;
  Placer& placer_;
  const CommModel& comm_;
  const EngineOptions& o_;
  ModelCapacity capacity_;
  SimulationResult res_;

  double now_ = 0;
  std::size_t free_ = 0;
  double busy_gpu_seconds_ = 0;
  std::vector<GpuPower> node_power_;  // per node: its GPUs' power figures
  double free_idle_w_ = 0;            // idle power of the free GPUs
  std::vector<double> job_idle_w_;    // per running job: idle power of its GPUs
  std::uint64_t seq_ = 0;
  // Finish events, a min-heap on (time, seq); stale entries (older versions) are skipped
  // when popped and purged when they outnumber the live ones.
  std::vector<Event> heap_;
  std::size_t running_count_ = 0;
  std::map<std::pair<int, std::uint32_t>, std::uint32_t> queue_;
  std::vector<double> remaining_, rate_, last_update_, estimate_;
  std::vector<std::uint32_t> version_;
  std::vector<char> running_;
  std::vector<std::uint64_t> failed_epoch_;  // release epoch of the job's last failed placement
  std::uint64_t release_epoch_ = 0;
  std::vector<std::pair<double, double>> est_;
  std::vector<std::vector<UplinkUse>> uses_;
  std::vector<double> uplink_load_;
  std::vector<std::vector<std::uint32_t>> uplink_jobs_;
  std::vector<double> share_;  // per job: max-min fair share of its network demand (1 = none lost)
  std::vector<std::uint32_t> dirty_links_;  // uplinks changed since the last recompute_shares
  std::vector<char> link_dirty_;
  std::uint64_t stamp_ = 0;  // one per recompute_shares, marks what it has visited
  std::vector<std::uint64_t> link_stamp_, job_stamp_;
  std::vector<std::uint32_t> job_local_, comp_jobs_, comp_links_;
  // max_min_rates' inputs and scratch, kept warm between calls.
  std::vector<double> mm_demand_, mm_capacity_, mm_rate_;
  std::vector<std::uint32_t> mm_begin_, mm_jobs_;
  MaxMinWorkspace mm_ws_;
  std::vector<std::uint32_t> affected_;
  std::vector<std::uint64_t> affected_stamp_;  // refresh round in which a job was last marked
  std::uint64_t refresh_round_ = 0;
  // Running jobs by estimated end (add_end / drop_end): end time, start sequence number and
  // job index per entry, sorted by (end, sequence).
  std::vector<double> end_t_;
  std::vector<std::uint64_t> end_seq_of_;
  std::vector<std::uint32_t> end_job_;
  std::vector<std::pair<double, std::uint64_t>> end_key_;  // per job: its entry's (end, sequence) while running
  std::uint64_t end_seq_ = 0;
  // The head's reservation (placers that plan them), valid while nothing started or ended.
  struct HeadReservation {
    std::uint64_t release_epoch = ~std::uint64_t{0};
    std::uint32_t head = 0;
    bool planned = false;
    double shadow = 0;
    std::vector<GpuId> gpus;
    std::size_t gpus_free_now = 0;
  } reservation_;
  std::uint64_t reservation_gen_ = 0;
  std::vector<std::uint64_t> failed_around_;  // reservation generation of a failed place_around
  std::vector<TimelinePoint> changes_;
  std::vector<std::pair<double, double>> frag_samples_;
  std::size_t frag_every_ = 1;
  std::string permanent_error_;
};

}  // namespace

Result<SimulationResult> run_simulation(const Cluster& cluster, const Trace& trace, Placer& placer, const CommModel& comm,
                                        const EngineOptions& options, std::string policy_name) {
  if (cluster.gpu_count() == 0) return make_error(ErrorCode::kValidation, "the cluster has no GPU");
  Engine e(cluster, trace, placer, comm, options);
  auto r = e.run();
  if (r) r->policy = std::move(policy_name);
  return r;
}

}  // namespace toposched::sim
