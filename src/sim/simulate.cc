#include "sim/simulate.h"

#include <mutex>
#include <optional>
#include <thread>

namespace toposched::sim {

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
  std::vector<double> fraction(n, 0);
  std::mutex mu;
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      EngineOptions o = options;
      o.progress = [&, i](double f) {
        if (!progress) return;
        std::lock_guard lock(mu);
        fraction[i] = f;
        double sum = 0;
        for (double x : fraction) sum += x;
        progress(sum / static_cast<double>(n));
      };
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
