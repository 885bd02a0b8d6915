// EtcdClient: the part of etcd's v3 API toposched needs (KV range/put/delete/txn, leases),
// spoken over etcd's own HTTP/JSON gateway (`/v3/kv/...`, `/v3/lease/...`, served by every
// etcd 3.4 member on its client port) with cpp-httplib. Keys and values are raw bytes here;
// the client base64-encodes them on the wire as the gateway requires.
//
// Several endpoints (the members of one etcd cluster): a call goes to the endpoint that last
// answered; when it cannot connect, or the member answers that it has no leader, the call
// moves on to the next endpoint until every one was tried or the call's deadline passed.
// A Txn (not idempotent) is retried on another endpoint only when the request provably never
// reached a member (connection refused); a timeout after sending is reported as
// kUnavailable with "outcome unknown", since etcd may have applied it.
//
// Errors: kUnavailable (no member reachable in time, no quorum), kParse (a member answered
// something that is not etcd's JSON: "etcd /v3/kv/range reply:1:7: ..." or "etcd
// /v3/kv/range reply, kvs[0]: 'mod_revision': expected ..."), kIo (malformed base64 or an
// unexpected gRPC code), kNotFound (lease not found), kInvalidArgument (the
// request was refused as malformed, e.g. too many operations in one Txn).
//
// Thread-safety: every public method may be called from any thread; calls on one client are
// serialised by an internal mutex (one connection at a time). Give each thread that must not
// wait behind another (the lease keep-alive loop) its own client.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/error.h"
#include "topology/mutex.h"

namespace toposched::service {

struct EtcdEndpoint {
  std::string host;
  int port = 0;
};

// "HOST:PORT,HOST:PORT,..." (an optional "http://" before each is accepted).
Result<std::vector<EtcdEndpoint>> parse_etcd_endpoints(std::string_view text);

struct EtcdKeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::int64_t lease = 0;
};

struct EtcdRangeResult {
  std::int64_t revision = 0;  // the store revision the read saw
  std::vector<EtcdKeyValue> kvs;
  std::int64_t count = 0;     // keys in the range (may exceed kvs.size() with a limit)
  bool more = false;
};

// One comparison of a Txn: `target(key) result operand`.
struct EtcdCompare {
  enum class Target { kVersion, kCreate, kMod, kValue, kLease };
  enum class Op { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kCreate;
  Op op = Op::kEqual;
  std::int64_t number = 0;  // kVersion, kCreate, kMod, kLease
  std::string value;        // kValue
};

// One operation of a Txn branch.
struct EtcdOp {
  enum class Kind { kPut, kDelete, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;         // kPut
  std::string range_end;     // kDelete/kRange: empty = just `key`
  std::int64_t lease = 0;    // kPut: attach to this lease (0 = none)
  std::int64_t limit = 0;    // kRange

  static EtcdOp put(std::string key, std::string value, std::int64_t lease = 0);
  static EtcdOp erase(std::string key, std::string range_end = {});
  static EtcdOp get(std::string key, std::string range_end = {}, std::int64_t limit = 0);
};

struct EtcdTxnResult {
  bool succeeded = false;
  std::int64_t revision = 0;                  // the store revision after the Txn
  std::vector<EtcdRangeResult> ranges;        // one per kRange op of the branch taken, in order
};

struct EtcdLease {
  std::int64_t id = 0;
  std::int64_t ttl_s = 0;  // as granted (etcd raises TTLs below its minimum)
};

// The end of the key range holding every key that starts with `prefix` (etcd's "prefix
// end": the prefix with its last byte incremented).
std::string etcd_prefix_end(std::string_view prefix);

class EtcdClient {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::chrono::milliseconds connect_timeout{500};
    std::chrono::milliseconds request_timeout{2000};  // per call, over all endpoints tried
  };

  EtcdClient(std::vector<EtcdEndpoint> endpoints, Options options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Each call accepts an absolute deadline; none = now + request_timeout.
  using Deadline = std::optional<Clock::time_point>;

  // Keys in [key, range_end) (range_end empty: only `key`). `serializable` reads the member's
  // local copy (answers without a quorum, may be stale); otherwise linearizable.
  // `revision` > 0 reads that past revision (a consistent snapshot across pages).
  Result<EtcdRangeResult> range(std::string_view key, std::string_view range_end = {},
                                std::int64_t limit = 0, std::int64_t revision = 0,
                                bool serializable = false, Deadline deadline = {});
  // Returns the store revision after the put.
  Result<std::int64_t> put(std::string_view key, std::string_view value, std::int64_t lease = 0,
                           Deadline deadline = {});
  Result<EtcdTxnResult> txn(const std::vector<EtcdCompare>& compares,
                            const std::vector<EtcdOp>& success, const std::vector<EtcdOp>& failure,
                            Deadline deadline = {});
  Result<EtcdLease> grant_lease(std::int64_t ttl_s, Deadline deadline = {});
  // One keep-alive; returns the TTL now left (0: the lease is gone).
  Result<std::int64_t> keep_alive(std::int64_t lease_id, Deadline deadline = {});
  Result<void> revoke_lease(std::int64_t lease_id, Deadline deadline = {});

  const std::vector<EtcdEndpoint>& endpoints() const { return endpoints_; }
  std::string endpoints_text() const;

 private:
  struct Connection;
  // POSTs `body` to `path`, failing over between endpoints; `idempotent` allows a retry after
  // a request may have reached a member.
  Result<std::string> call(std::string_view path, const std::string& body, bool idempotent,
                           Deadline deadline) EXCLUDES(mutex_);

  std::vector<EtcdEndpoint> endpoints_;
  Options options_;
  Mutex mutex_;
  std::vector<std::unique_ptr<Connection>> connections_ GUARDED_BY(mutex_);
  std::size_t current_ GUARDED_BY(mutex_) = 0;
};

}  // namespace toposched::service
