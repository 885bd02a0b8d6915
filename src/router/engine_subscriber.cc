#include "router/engine_subscriber.h"

#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "topology/mutex.h"

namespace toposched::router {

Result<EngineEndpoint> parse_engine_endpoint(std::string_view spec, int workers) {
  auto bad = [&](std::string what) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--router-kv-events '{}': {}", spec, what));
  };
  auto eq = spec.find('=');
  if (eq == std::string_view::npos) return bad("expected WORKER=ENDPOINT[,replay=ENDPOINT][,topic=T]");
  EngineEndpoint e;
  std::string w(spec.substr(0, eq));
  std::size_t used = 0;
  try {
    e.worker = std::stoi(w, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != w.size() || w.empty() || e.worker < 0 || e.worker >= workers)
    return bad(fmt::format("expected a worker index 0..{} before '=', found '{}'", workers - 1, w));
  std::string_view rest = spec.substr(eq + 1);
  bool first = true;
  while (!rest.empty() || first) {
    auto comma = rest.find(',');
    std::string_view part = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (first) {
      if (part.empty()) return bad("expected an endpoint after '=' (e.g. tcp://127.0.0.1:5557)");
      e.endpoint = std::string(part);
      first = false;
    } else if (part.starts_with("replay=")) {
      e.replay = std::string(part.substr(7));
    } else if (part.starts_with("topic=")) {
      e.topic = std::string(part.substr(6));
    } else {
      return bad(fmt::format("unknown part '{}' (expected replay=ENDPOINT or topic=T)", part));
    }
  }
  return e;
}

struct EngineSubscriber::Impl {
  Impl(RouterService& s, std::vector<EngineEndpoint> e, Log l, EngineSubscriberOptions o)
      : service(s), endpoints(std::move(e)), log(std::move(l)), options(o), counters(endpoints.size()) {}
  RouterService& service;
  std::vector<EngineEndpoint> endpoints;
  Log log;
  EngineSubscriberOptions options;
  zmq::context_t context{1};
  std::vector<zmq::socket_t> subs;                       // owned by the thread once it runs
  std::vector<std::unique_ptr<zmq::socket_t>> replays;  // the same; created on first use
  mutable Mutex counters_mutex;
  std::vector<Counters> counters GUARDED_BY(counters_mutex);
  std::atomic<bool> stopping{false};
  std::thread thread;

  void run();
  void on_message(std::size_t i, std::vector<zmq::message_t>& frames);
  void on_gap(std::size_t i, std::int64_t from, std::int64_t until, bool clear_if_incomplete);
  bool replay(std::size_t i, std::int64_t from, std::int64_t until);
  void apply(std::size_t i, std::int64_t seq, std::span<const std::byte> payload);
  void clear(std::size_t i, const std::string& why);
  void note(std::size_t i, const std::string& what) {
    if (log) log(fmt::format("router worker {} ({}): {}", endpoints[i].worker, endpoints[i].endpoint, what));
  }
  std::int64_t last_seq(std::size_t i) {
    MutexLock l(counters_mutex);
    return counters[i].last_seq;
  }
};

namespace {

std::int64_t big_endian_seq(const zmq::message_t& m) {
  const auto* p = static_cast<const unsigned char*>(m.data());
  std::uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v = v << 8 | p[k];
  return static_cast<std::int64_t>(v);
}

std::span<const std::byte> bytes_of(const zmq::message_t& m) { return {static_cast<const std::byte*>(m.data()), m.size()}; }

}  // namespace

void EngineSubscriber::Impl::apply(std::size_t i, std::int64_t seq, std::span<const std::byte> payload) {
  auto batch = decode_engine_batch(payload);
  Result<std::vector<RouterEvent>> events =
      batch ? engine_batch_to_router_events(*batch, static_cast<std::uint64_t>(endpoints[i].worker), service.block_tokens())
            : tl::unexpected(batch.error());
  ApplyOutcome out;
  if (events) out = service.apply_to_slot(endpoints[i].worker, *events);
  std::string problem = !events ? fmt::format("batch {} not applied: {}", seq, events.error().message)
                        : out.refused ? fmt::format("batch {}: {} events refused ({})", seq, out.refused, out.first_refusal)
                                      : std::string();
  {
    MutexLock l(counters_mutex);
    Counters& c = counters[i];
    ++c.batches;
    c.last_seq = seq;
    if (!events) ++c.decode_errors;
    else {
      c.events += events->size();
      c.applied += out.applied;
      c.refused += out.refused;
    }
    if (!problem.empty()) c.last_error = problem;
  }
  if (!problem.empty()) note(i, problem);
}

void EngineSubscriber::Impl::clear(std::size_t i, const std::string& why) {
  service.clear_slot(endpoints[i].worker);
  {
    MutexLock l(counters_mutex);
    ++counters[i].clears;
    counters[i].last_error = why;
  }
  note(i, why + "; its cached blocks are cleared from the router's index");
}

// Asks the replay socket for batches from `from` on and applies those before `until`.
// False when no end marker came within the timeout.
bool EngineSubscriber::Impl::replay(std::size_t i, std::int64_t from, std::int64_t until) {
  auto& sock = replays[i];
  if (!sock) {
    sock = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
    sock->set(zmq::sockopt::linger, 0);
    sock->connect(endpoints[i].replay);
  }
  unsigned char start[8];
  for (int k = 0; k < 8; ++k) start[k] = static_cast<unsigned char>(static_cast<std::uint64_t>(from) >> (8 * (7 - k)));
  sock->send(zmq::message_t(), zmq::send_flags::sndmore);
  sock->send(zmq::buffer(start, 8), zmq::send_flags::none);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.replay_timeout_ms);
  std::size_t applied = 0;
  while (!stopping) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{static_cast<void*>(*sock), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0) break;
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*sock, std::back_inserter(frames), zmq::recv_flags::dontwait)) continue;
    // DEALER keeps the ROUTER's empty delimiter: ("", seq, payload).
    if (!frames.empty() && frames.front().size() == 0) frames.erase(frames.begin());
    if (frames.size() != 2 || frames[0].size() != 8) continue;
    std::int64_t seq = big_endian_seq(frames[0]);
    if (seq == -1) {
      MutexLock l(counters_mutex);
      counters[i].replayed += applied;
      return true;
    }
    if (seq >= from && seq < until && seq > last_seq(i)) {
      apply(i, seq, bytes_of(frames[1]));
      ++applied;
    }
  }
  sock.reset();  // late replies must not be read as answers to the next request
  MutexLock l(counters_mutex);
  counters[i].replayed += applied;
  return false;
}

void EngineSubscriber::Impl::on_gap(std::size_t i, std::int64_t from, std::int64_t until, bool clear_if_incomplete) {
  {
    MutexLock l(counters_mutex);
    ++counters[i].gaps;
  }
  if (endpoints[i].replay.empty()) {
    if (clear_if_incomplete) clear(i, fmt::format("batches {}..{} missed and no replay endpoint", from, until - 1));
    return;
  }
  bool answered = replay(i, from, until);
  if (clear_if_incomplete && last_seq(i) != until - 1)
    clear(i, answered ? fmt::format("batches {}..{} missed; the replay buffer no longer holds them all", from, until - 1)
                      : fmt::format("batches {}..{} missed; the replay socket did not answer within {} ms", from, until - 1,
                                    options.replay_timeout_ms));
}

void EngineSubscriber::Impl::on_message(std::size_t i, std::vector<zmq::message_t>& frames) {
  if (frames.size() != 3 || frames[1].size() != 8) {
    MutexLock l(counters_mutex);
    ++counters[i].decode_errors;
    counters[i].last_error = fmt::format("expected 3 frames (topic, 8-byte sequence, payload), found {}", frames.size());
    return;
  }
  const std::int64_t seq = big_endian_seq(frames[1]);
  const std::int64_t last = last_seq(i);
  if (last >= 0 && seq <= last) {
    if (seq != 0 || last == 0) return;  // repeated or older
    clear(i, fmt::format("sequence restarted at 0 after {} (engine restarted)", last));
  } else if (last >= 0 && seq > last + 1) {
    on_gap(i, last + 1, seq, true);
  } else if (last < 0 && seq > 0) {
    on_gap(i, 0, seq, false);  // joined late: fetch what the buffer still holds
  }
  apply(i, seq, bytes_of(frames[2]));
}

void EngineSubscriber::Impl::run() {
  while (!stopping) {
    std::vector<zmq::pollitem_t> items;
    for (auto& s : subs) items.push_back({static_cast<void*>(s), 0, ZMQ_POLLIN, 0});
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(options.poll_interval_ms));
      for (std::size_t i = 0; i < subs.size() && !stopping; ++i) {
        if (!(items[i].revents & ZMQ_POLLIN)) continue;
        for (int drained = 0; drained < 1024 && !stopping; ++drained) {
          std::vector<zmq::message_t> frames;
          if (!zmq::recv_multipart(subs[i], std::back_inserter(frames), zmq::recv_flags::dontwait)) break;
          on_message(i, frames);
        }
      }
    } catch (const zmq::error_t& e) {
      if (log) log(fmt::format("router KV event subscriber: {}", e.what()));
      if (e.num() == ETERM) return;
    }
  }
}

Result<std::unique_ptr<EngineSubscriber>> EngineSubscriber::start(RouterService& service, std::vector<EngineEndpoint> endpoints, Log log,
                                                                  EngineSubscriberOptions options) {
  auto impl = std::make_unique<Impl>(service, std::move(endpoints), std::move(log), options);
  for (const EngineEndpoint& e : impl->endpoints) {
    try {
      zmq::socket_t s(impl->context, zmq::socket_type::sub);
      s.set(zmq::sockopt::linger, 0);
      s.set(zmq::sockopt::subscribe, e.topic);
      s.connect(e.endpoint);
      impl->subs.push_back(std::move(s));
    } catch (const zmq::error_t& err) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("--router-kv-events: endpoint '{}' of worker {}: {}", e.endpoint, e.worker, err.what()));
    }
    if (!e.replay.empty()) {
      // Checked now so that a bad replay endpoint fails at startup, not at the first gap.
      try {
        zmq::socket_t probe(impl->context, zmq::socket_type::dealer);
        probe.set(zmq::sockopt::linger, 0);
        probe.connect(e.replay);
      } catch (const zmq::error_t& err) {
        return make_error(ErrorCode::kInvalidArgument, fmt::format("--router-kv-events: replay endpoint '{}' of worker {}: {}", e.replay, e.worker, err.what()));
      }
    }
  }
  impl->replays.resize(impl->endpoints.size());
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<EngineSubscriber>(new EngineSubscriber(std::move(impl)));
}

EngineSubscriber::EngineSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EngineSubscriber::~EngineSubscriber() { stop(); }

void EngineSubscriber::stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  if (impl_->thread.joinable()) impl_->thread.join();
}

nlohmann::json EngineSubscriber::status() const {
  nlohmann::json subs = nlohmann::json::array();
  MutexLock l(impl_->counters_mutex);
  for (std::size_t i = 0; i < impl_->endpoints.size(); ++i) {
    const EngineEndpoint& e = impl_->endpoints[i];
    const Counters& c = impl_->counters[i];
    subs.push_back({{"worker", e.worker}, {"endpoint", e.endpoint}, {"replay", e.replay.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.replay)},
                    {"batches", c.batches}, {"events", c.events}, {"applied", c.applied}, {"refused", c.refused},
                    {"last_seq", c.last_seq}, {"gaps", c.gaps}, {"replayed_batches", c.replayed}, {"clears", c.clears},
                    {"decode_errors", c.decode_errors}, {"last_error", c.last_error}});
  }
  return {{"subscribers", std::move(subs)}};
}

}  // namespace toposched::router
