// Subscribes to engines' KV event publishers (vLLM's and SGLang's ZmqEventPublisher) and
// feeds what they publish to a RouterService, one worker slot per publisher.
//
// Wire format (vllm/distributed/kv_events.py): a PUB socket sends three frames per batch,
// (topic, sequence number as 8 bytes big-endian, msgpack EventBatch); a ROUTER "replay"
// socket answers a request carrying an 8-byte big-endian start sequence with one message
// (sequence, payload) per buffered batch from there, then (-1 as 8 bytes, empty payload).
// The subscriber keeps each publisher's last sequence number. After a gap (a sequence
// number that skips some) it asks the replay socket for the missing batches and applies them
// in order; when there is no replay endpoint, or the replay does not bring every missing
// batch within `replay_timeout_ms`, it clears that worker's cache entries (they can no
// longer be trusted) and logs why. A sequence number that goes back to 0 is a restarted
// engine: its worker is cleared too. Older or repeated numbers are ignored.
// A payload that does not decode, or an event the index refuses (unknown parent), is counted
// and logged; nothing stops the subscriber but stop().
//
// Thread-safety: one background thread owns the sockets; status() may be called from any
// thread (the counters are guarded by a mutex). Events are applied through RouterService,
// which serialises them with routing.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "router/api.h"

namespace toposched::router {

struct EngineEndpoint {
  int worker = 0;          // the router's worker slot
  std::string endpoint;    // the publisher's PUB socket, e.g. tcp://10.0.0.7:5557
  std::string replay;      // its ROUTER replay socket, or empty
  std::string topic;       // subscription prefix ("" = every topic, vLLM's default topic is "")
};

// "W=ENDPOINT[,replay=ENDPOINT][,topic=T]" (serve --router-kv-events). Errors name the part.
Result<EngineEndpoint> parse_engine_endpoint(std::string_view spec, int workers);

struct EngineSubscriberOptions {
  int replay_timeout_ms = 1000;
  int poll_interval_ms = 50;
};

class EngineSubscriber {
 public:
  using Log = std::function<void(const std::string&)>;
  // Connects every endpoint (ZMQ connects lazily: an engine not up yet is no error) and
  // starts the thread. Errors: kInvalidArgument for an endpoint ZMQ rejects.
  static Result<std::unique_ptr<EngineSubscriber>> start(RouterService& service, std::vector<EngineEndpoint> endpoints,
                                                         Log log, EngineSubscriberOptions options = {});
  ~EngineSubscriber();  // stop()
  void stop();
  // {"subscribers": [{"worker", "endpoint", "replay", "batches", "events", "applied", "refused",
  //  "last_seq", "gaps", "replayed_batches", "clears", "decode_errors", "last_error"}]}
  nlohmann::json status() const;

  struct Counters {
    std::uint64_t batches = 0, events = 0, applied = 0, refused = 0, gaps = 0, replayed = 0, clears = 0, decode_errors = 0;
    std::int64_t last_seq = -1;
    std::string last_error;
  };

 private:
  struct Impl;
  explicit EngineSubscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace toposched::router
