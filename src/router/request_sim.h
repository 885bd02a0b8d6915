// The request-level simulator: replays an LLM request trace on a set of workers under one
// routing policy and reports what each request saw.
//
// Each worker runs continuous batching as vLLM's V1 scheduler does: every iteration decodes
// one token for each running sequence and fills the rest of a token budget
// (max_batched_tokens) with chunks of prompts being prefilled, first come first served;
// the iteration lasts TimeModel::iteration_s. A request is admitted when its KV blocks fit
// the worker's cache (LRU eviction of blocks no running request uses); its longest cached
// prefix (plus any prefix the router had it pull from another worker, which delays its
// admission by the transfer time) is not recomputed. Every block stored or evicted is
// reported to the router's KvIndex as a Dynamo KV event, at once or, with event_lag_s, that
// many seconds later (applied, in order, before the first routing decision after then).
// The router's blocks and prefill bookkeeping (prefill done, finished) are not delayed.
// With `disaggregated` (--pd) the first half of the workers prefill and the second half
// decode: after its prefill a request's whole KV moves to a decode worker, chosen by the
// transfer time from its prefill worker (kv-topo, kv-pull-blind) or by decode load (others).
//
// Deterministic: no clock, no randomness. Thread-safety: simulate_policy is reentrant.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "router/request_trace.h"
#include "router/router.h"

namespace toposched::router {

struct SimConfig {
  int block_tokens = kMooncakeBlockTokens;
  long long cache_blocks = 0;     // per worker: 0 = from GPU memory (TimeModel), < 0 = unlimited
  int max_batched_tokens = 8192;  // a common vLLM chunked-prefill budget
  int max_running = 256;          // vLLM's max_num_seqs
  double speed = 1.0;             // arrivals at this many times the trace's rate
  bool disaggregated = false;
  std::size_t timeline_points = 120;
  double load_weight = kDefaultLoadWeight;  // the router's anti-burst weight (RouterConfig)
  double predictor_scale = 1.0;             // the router's prefill predictor x this (robustness runs)
  double event_lag_s = 0;                   // KV events reach the router's index this late
  // Host memory per node (GB) that holds KV blocks the node's workers evict from GPU memory
  // (CPU offloading: LMCache, Dynamo's KVBM host tier, vLLM's offloading connector); 0 = no
  // host tier. A prompt block missing from its worker's cache but in its node's host tier is
  // loaded over the GPUs' PCIe links in the iteration that starts the prompt's prefill,
  // instead of being recomputed (docs/router.md, "Host-memory tier").
  double host_cache_gb = 0;
  // The first this many requests (in arrival order) are simulated but left out of the TTFT
  // and TPOT figures (a benchmark's warm-up stage; docs/router.md, "Warm-up"). Hit rates,
  // busy time and energy still count every request.
  std::size_t warmup_requests = 0;
};

struct RequestOutcome {
  int worker = -1;         // the worker that prefilled it
  int decode_worker = -1;  // with --pd
  double arrival_s = 0;
  double ready_s = 0;      // when a pulled prefix has arrived (= arrival_s without a pull)
  double admitted_s = 0;   // when its worker admitted it (its blocks fit); prefill side with --pd
  double predicted_ttft_s = 0;  // the router's first-token estimate when it routed it (kv-topo family; else 0)
  double ttft_s = 0;
  double tpot_s = -1;      // -1 when the request produced one token
  double finish_s = 0;
  int blocks = 0;
  int hit_blocks = 0;      // not recomputed: cached locally or pulled
  int pulled_blocks = 0;
  int host_blocks = 0;     // of hit_blocks: loaded from the node's host tier (SimConfig::host_cache_gb)
  double input_tokens = 0;
  double output_tokens = 0;
  double hit_tokens = 0;
};

struct LoadSample {
  double t_s = 0;
  int worker = 0;
  int active_requests = 0;
};

struct PolicyResult {
  std::string policy;
  std::vector<RequestOutcome> requests;  // in trace order
  std::size_t warmup_requests = 0;       // SimConfig::warmup_requests: the first ones, not in TTFT/TPOT figures
  std::vector<LoadSample> timeline;
  std::map<std::string, double> kv_bytes_by_level;  // path level name -> bytes moved between workers
  double kv_bytes_moved = 0;
  double busy_gpu_s = 0;
  double busy_fraction = 0;             // busy worker-seconds / (workers x (last finish - first arrival))
  double energy_kwh = 0;                // busy GPU time at board power
  long long cache_blocks_per_worker = 0;  // -1 unlimited
  long long host_cache_blocks_per_node = 0;  // 0: no host tier
};

// SimConfig::host_cache_gb within 0 .. kMaxHostCacheGb (a petabyte per node: far past any
// machine, small enough that its block count fits a long long); kInvalidArgument otherwise.
inline constexpr double kMaxHostCacheGb = 1e6;
Result<void> check_host_cache_gb(double gb);
// Blocks of SimConfig::host_cache_gb (checked) of the time model's KV per node.
long long host_cache_blocks_per_node(const TimeModel& time, const SimConfig& config);

// `hashes[i]` are the sequence hashes of trace.requests[i]. Errors: kInvalidArgument for a
// bad configuration (no workers, --pd with one worker, a cache smaller than one block).
Result<PolicyResult> simulate_policy(const Cluster& cluster, const std::vector<WorkerPlacement>& workers, const TimeModel& time,
                                     const RequestTrace& trace, const std::vector<std::vector<std::uint64_t>>& hashes,
                                     const PolicyEntry& policy, const SimConfig& config);

// TTFT of a prompt of `input_tokens` computed alone on an idle worker with nothing cached:
// its chunks of max_batched_tokens, one iteration each.
double unloaded_ttft_s(const TimeModel& time, int input_tokens, int max_batched_tokens);

// Token hit rate of one LRU cache of `capacity_blocks` blocks (< 0: unlimited) serving every
// request of the trace in arrival order: each request's longest cached prefix, capped at its
// input, then its blocks become the most recent (its first ones last, as the workers' caches
// keep shared prefixes longest). What one cache of the whole cluster's size could serve.
double oracle_token_hit_rate(const RequestTrace& trace, const std::vector<std::vector<std::uint64_t>>& hashes, long long capacity_blocks,
                             int block_tokens);

}  // namespace toposched::router
