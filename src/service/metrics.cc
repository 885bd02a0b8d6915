#include "service/metrics.h"

#include <sstream>

#include <prometheus/text_serializer.h>

namespace toposched::service {

namespace {
// 50 us .. ~1.6 s, doubling: decisions take tens of microseconds to milliseconds, and a
// commit one fsync (sub-millisecond on tmpfs, milliseconds on disk).
prometheus::Histogram::BucketBoundaries latency_buckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 50e-6; v < 2.0; v *= 2) b.push_back(v);
  return b;
}
}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      attempts_(prometheus::BuildCounter()
                    .Name("toposched_place_attempts_total")
                    .Help("Placement and release attempts by result")
                    .Register(*registry_)),
      http_(prometheus::BuildCounter()
                .Name("toposched_http_requests_total")
                .Help("HTTP requests answered, by status code")
                .Register(*registry_)),
      decision_(prometheus::BuildHistogram()
                    .Name("toposched_decision_seconds")
                    .Help("Time to decide one command (normalise, place, allocate), without the commit")
                    .Register(*registry_)
                    .Add({}, latency_buckets())),
      commit_(prometheus::BuildHistogram()
                  .Name("toposched_store_commit_seconds")
                  .Help("Time of one durable store commit (a group of mutations)")
                  .Register(*registry_)
                  .Add({}, latency_buckets())),
      batch_(prometheus::BuildHistogram()
                 .Name("toposched_store_commit_batch_size")
                 .Help("Mutations per store commit (group commit)")
                 .Register(*registry_)
                 .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256})),
      allocated_(prometheus::BuildGauge()
                     .Name("toposched_gpus_allocated")
                     .Help("GPUs held by jobs")
                     .Register(*registry_)
                     .Add({})),
      free_(prometheus::BuildGauge().Name("toposched_gpus_free").Help("Free GPUs").Register(*registry_).Add({})),
      jobs_(prometheus::BuildGauge().Name("toposched_jobs").Help("Placed jobs").Register(*registry_).Add({})),
      unusable_(prometheus::BuildGauge()
                    .Name("toposched_fragmentation_unusable_fraction")
                    .Help("Expected fraction of free GPUs a job of the default size mix cannot use")
                    .Register(*registry_)
                    .Add({})),
      unavailable_nodes_(prometheus::BuildGauge()
                             .Name("toposched_nodes_unavailable")
                             .Help("Nodes marked unavailable (cordoned, NotReady, drained, ...): no new jobs go there")
                             .Register(*registry_)
                             .Add({})),
      jobs_on_unavailable_nodes_(prometheus::BuildGauge()
                                     .Name("toposched_jobs_on_unavailable_nodes")
                                     .Help("Jobs holding GPUs on at least one unavailable node")
                                     .Register(*registry_)
                                     .Add({})) {}

prometheus::Counter& Metrics::labelled(prometheus::Family<prometheus::Counter>& family, std::string_view label,
                                       std::string_view value,
                                       std::map<std::string, prometheus::Counter*, std::less<>>& cache) {
  auto it = cache.find(value);
  if (it != cache.end()) return *it->second;
  prometheus::Counter& c = family.Add({{std::string(label), std::string(value)}});
  cache.emplace(std::string(value), &c);
  return c;
}

// The lock covers the cache lookup only: counters are atomic.
void Metrics::count_attempt(std::string_view result) {
  prometheus::Counter* counter = nullptr;
  {
    MutexLock lock(mutex_);
    counter = &labelled(attempts_, "result", result, attempt_cache_);
  }
  counter->Increment();
}

void Metrics::count_http(int status) {
  prometheus::Counter* counter = nullptr;
  {
    MutexLock lock(mutex_);
    counter = &labelled(http_, "code", std::to_string(status), http_cache_);
  }
  counter->Increment();
}

void Metrics::observe_commit(double seconds, std::size_t batch_size) {
  commit_.Observe(seconds);
  batch_.Observe(static_cast<double>(batch_size));
}

void Metrics::set_state(std::int64_t allocated_gpus, std::int64_t free_gpus, std::int64_t jobs,
                        double unusable_fraction) {
  allocated_.Set(static_cast<double>(allocated_gpus));
  free_.Set(static_cast<double>(free_gpus));
  jobs_.Set(static_cast<double>(jobs));
  unusable_.Set(unusable_fraction);
}

void Metrics::set_unavailable(std::int64_t nodes, std::int64_t jobs_on_them) {
  unavailable_nodes_.Set(static_cast<double>(nodes));
  jobs_on_unavailable_nodes_.Set(static_cast<double>(jobs_on_them));
}

std::string Metrics::render() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace toposched::service
