// Metrics: the Prometheus metrics of `toposched serve` (GET /metrics), kept in a
// prometheus-cpp registry and rendered with its TextSerializer (no embedded HTTP server).
//
//   toposched_place_attempts_total{result}   placed | dry_run | released | infeasible |
//                                            conflict | invalid | not_found | unavailable | error
//   toposched_decision_seconds               histogram: deciding one command (no commit)
//   toposched_store_commit_seconds           histogram: one durable store commit (a batch)
//   toposched_store_commit_batch_size        histogram: mutations per commit (group commit)
//   toposched_http_requests_total{code}      every HTTP answer by status code
//   toposched_gpus_allocated, toposched_gpus_free, toposched_jobs,
//   toposched_fragmentation_unusable_fraction,
//   toposched_nodes_unavailable                 nodes some source marked unavailable
//   toposched_jobs_on_unavailable_nodes         jobs holding GPUs on such a node
//                                               gauges, set when /metrics is scraped
//
// Thread-safety: every method may be called from any thread (prometheus-cpp metrics are
// atomic; label lookups take the family's mutex once and are then cached here under ours).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "topology/mutex.h"

namespace toposched::service {

class Metrics {
 public:
  Metrics();

  void count_attempt(std::string_view result) EXCLUDES(mutex_);
  void observe_decision(double seconds) { decision_.Observe(seconds); }
  void observe_commit(double seconds, std::size_t batch_size);
  void count_http(int status) EXCLUDES(mutex_);
  void set_state(std::int64_t allocated_gpus, std::int64_t free_gpus, std::int64_t jobs, double unusable_fraction);
  void set_unavailable(std::int64_t nodes, std::int64_t jobs_on_them);

  // Prometheus text exposition format 0.0.4.
  std::string render() const;

 private:
  prometheus::Counter& labelled(prometheus::Family<prometheus::Counter>& family, std::string_view label,
                                std::string_view value, std::map<std::string, prometheus::Counter*, std::less<>>& cache)
      REQUIRES(mutex_);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& attempts_;
  prometheus::Family<prometheus::Counter>& http_;
  prometheus::Histogram& decision_;
  prometheus::Histogram& commit_;
  prometheus::Histogram& batch_;
  prometheus::Gauge& allocated_;
  prometheus::Gauge& free_;
  prometheus::Gauge& jobs_;
  prometheus::Gauge& unusable_;
  prometheus::Gauge& unavailable_nodes_;
  prometheus::Gauge& jobs_on_unavailable_nodes_;
  Mutex mutex_;
  std::map<std::string, prometheus::Counter*, std::less<>> attempt_cache_ GUARDED_BY(mutex_);
  std::map<std::string, prometheus::Counter*, std::less<>> http_cache_ GUARDED_BY(mutex_);
};

}  // namespace toposched::service
