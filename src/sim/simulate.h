// Runs one trace on one cluster under several placement policies side by side, one thread
// per policy, every thread on the same read-only inputs, and collects the results in the
// order the policies were given (so the output does not depend on thread timing).
// Thread-safety: call from one thread; it joins its workers before returning.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "sim/backend.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace toposched::sim {

struct PolicyOutcome {
  SimulationResult result;
  PolicySummary summary;
};

// `make` builds each policy's Placer (make_placer by default). Progress reports the mean
// fraction done over all policies. Fails with the first policy error, in policy order.
using PlacerFactory = std::function<Result<std::unique_ptr<Placer>>(const Cluster&, const std::string&, std::uint64_t)>;

Result<std::vector<PolicyOutcome>> simulate_policies(const Cluster& cluster, const Trace& trace, const std::vector<std::string>& policies,
                                                     const CommModel& comm, EngineOptions options, PlacerFactory make = {},
                                                     std::function<void(double)> progress = {});

}  // namespace toposched::sim
