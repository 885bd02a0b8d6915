#include "sim/simulate.h"

#include <optional>
#include <thread>

#include "topology/mutex.h"

namespace toposched::sim {

namespace {
// The overall fraction done of several simulations running at once, each on its thread.
class CombinedProgress {
 public:
  CombinedProgress(std::size_t runs, std::function<void(double)> report)
      : report_(std::move(report)), fraction_(runs, 0.0) {}
  // Run `run` is `f` done: reports the mean over every run (serialised, so the callback
  // needs no lock of its own).
  void update(std::size_t run, double f) EXCLUDES(mu_) {
    if (!report_) return;
    MutexLock lock(mu_);
    fraction_[run] = f;
    double sum = 0;
    for (double x : fraction_) sum += x;
    report_(sum / static_cast<double>(fraction_.size()));
  }

 private:
  std::function<void(double)> report_;
  Mutex mu_;
  std::vector<double> fraction_ GUARDED_BY(mu_);
};
}  // namespace

Result<std::vector<PolicyOutcome>> simulate_policies(const Cluster& cluster, const Trace& trace, const std::vector<std::string>& policies,
                                                     const CommModel& comm, EngineOptions options, PlacerFactory make,
                                                     std::function<void(double)> progress) {
  if (!make) make = [](const Cluster& c, const std::string& p, std::uint64_t seed) { return make_placer(c, p, seed); };
  std::size_t n = policies.size();
  // Build every placer first, on this thread, so a bad name fails before any work.
  std::vector<std::unique_ptr<Placer>> placers;
  for (const std::string& p : policies) {
    auto placer = make(cluster, p, options.seed);
    if (!placer) return tl::unexpected(placer.error());
    placers.push_back(std::move(*placer));
  }
  std::vector<std::optional<Result<SimulationResult>>> results(n);
  CombinedProgress combined(n, std::move(progress));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      EngineOptions o = options;
      o.progress = [&combined, i](double f) { combined.update(i, f); };
      results[i] = run_simulation(cluster, trace, *placers[i], comm, o, policies[i]);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<PolicyOutcome> out;
  for (std::size_t i = 0; i < n; ++i) {
    if (!*results[i]) return tl::unexpected(results[i]->error());
    PolicyOutcome po;
    po.result = std::move(**results[i]);
    po.summary = summarize(trace, po.result);
    out.push_back(std::move(po));
  }
  return out;
}

}  // namespace toposched::sim
