#include "service/etcd_client.h"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace toposched::service {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Base64 through OpenSSL's EVP block coder (the gateway carries bytes fields as base64).
std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.empty()) return std::string();
  if (text.size() % 4 != 0) return make_error(ErrorCode::kIo, "etcd: malformed base64 in a reply");
  std::string out(3 * text.size() / 4, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return make_error(ErrorCode::kIo, "etcd: malformed base64 in a reply");
  std::size_t padding = text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

// The gateway writes int64 fields as JSON strings, and leaves out fields equal to zero.
std::int64_t int_field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const std::string& s = it->get_ref<const std::string&>();
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

Result<EtcdKeyValue> parse_kv(const json& j) {
  EtcdKeyValue kv;
  TOPOSCHED_TRY(key, base64_decode(j.value("key", "")));
  TOPOSCHED_TRY(value, base64_decode(j.value("value", "")));
  kv.key = std::move(key);
  kv.value = std::move(value);
  kv.create_revision = int_field(j, "create_revision");
  kv.mod_revision = int_field(j, "mod_revision");
  kv.version = int_field(j, "version");
  kv.lease = int_field(j, "lease");
  return kv;
}

Result<EtcdRangeResult> parse_range(const json& j, std::int64_t revision) {
  EtcdRangeResult r;
  r.revision = revision;
  if (auto it = j.find("kvs"); it != j.end())
    for (const auto& kv : *it) {
      TOPOSCHED_TRY(parsed, parse_kv(kv));
      r.kvs.push_back(std::move(parsed));
    }
  r.count = int_field(j, "count");
  r.more = j.value("more", false);
  return r;
}

std::int64_t header_revision(const json& j) {
  auto it = j.find("header");
  return it == j.end() ? 0 : int_field(*it, "revision");
}

json op_json(const EtcdOp& op) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      json put = {{"key", base64_encode(op.key)}, {"value", base64_encode(op.value)}};
      if (op.lease != 0) put["lease"] = std::to_string(op.lease);
      return {{"request_put", put}};
    }
    case EtcdOp::Kind::kDelete: {
      json del = {{"key", base64_encode(op.key)}};
      if (!op.range_end.empty()) del["range_end"] = base64_encode(op.range_end);
      return {{"request_delete_range", del}};
    }
    case EtcdOp::Kind::kRange: break;
  }
  json range = {{"key", base64_encode(op.key)}};
  if (!op.range_end.empty()) range["range_end"] = base64_encode(op.range_end);
  if (op.limit > 0) range["limit"] = std::to_string(op.limit);
  return {{"request_range", range}};
}

json compare_json(const EtcdCompare& c) {
  static constexpr const char* kTargets[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
  static constexpr const char* kFields[] = {"version", "create_revision", "mod_revision", "value", "lease"};
  static constexpr const char* kOps[] = {"EQUAL", "NOT_EQUAL", "GREATER", "LESS"};
  auto t = static_cast<std::size_t>(c.target);
  json j = {{"key", base64_encode(c.key)}, {"target", kTargets[t]}, {"result", kOps[static_cast<std::size_t>(c.op)]}};
  if (c.target == EtcdCompare::Target::kValue)
    j[kFields[t]] = base64_encode(c.value);
  else
    j[kFields[t]] = std::to_string(c.number);
  return j;
}

// What an error reply from etcd means for failover.
enum class Reply { kOk, kRetryAnywhere, kMaybeApplied, kFinal };

Reply classify_error_reply(int status, const std::string& message) {
  // No leader: the member refused before proposing, so nothing was applied.
  if (message.find("no leader") != std::string::npos) return Reply::kRetryAnywhere;
  if (status == 503 || status == 504 || message.find("timed out") != std::string::npos ||
      message.find("leader changed") != std::string::npos)
    return Reply::kMaybeApplied;
  return Reply::kFinal;
}

ErrorCode code_for_final(int grpc_code) {
  switch (grpc_code) {
    case 3: return ErrorCode::kInvalidArgument;  // InvalidArgument (e.g. too many ops)
    case 5: return ErrorCode::kNotFound;         // NotFound (lease)
    case 8: return ErrorCode::kUnavailable;      // ResourceExhausted (quota)
    case 14: return ErrorCode::kUnavailable;
    default: return ErrorCode::kIo;
  }
}

}  // namespace

EtcdOp EtcdOp::put(std::string key, std::string value, std::int64_t lease) {
  EtcdOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

EtcdOp EtcdOp::erase(std::string key, std::string range_end) {
  EtcdOp op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

EtcdOp EtcdOp::get(std::string key, std::string range_end, std::int64_t limit) {
  EtcdOp op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  op.limit = limit;
  return op;
}

std::string etcd_prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Result<std::vector<EtcdEndpoint>> parse_etcd_endpoints(std::string_view text) {
  std::vector<EtcdEndpoint> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (item.starts_with("http://")) item.remove_prefix(7);
    std::size_t colon = item.rfind(':');
    int port = 0;
    if (colon == std::string_view::npos || colon == 0 ||
        std::from_chars(item.data() + colon + 1, item.data() + item.size(), port).ec != std::errc() ||
        port <= 0 || port > 65535)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("etcd endpoint '{}': expected HOST:PORT (e.g. 127.0.0.1:2379)", item));
    out.push_back({std::string(item.substr(0, colon)), port});
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

struct EtcdClient::Connection {
  explicit Connection(const EtcdEndpoint& e) : http(e.host, e.port) {
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);  // a request is a header and a body write: no 40 ms Nagle wait between them
  }
  httplib::Client http;
};

EtcdClient::EtcdClient(std::vector<EtcdEndpoint> endpoints, Options options)
    : endpoints_(std::move(endpoints)), options_(options) {
  for (const auto& e : endpoints_) connections_.push_back(std::make_unique<Connection>(e));
}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::endpoints_text() const {
  std::string out;
  for (const auto& e : endpoints_) out += fmt::format("{}{}:{}", out.empty() ? "" : ",", e.host, e.port);
  return out;
}

Result<std::string> EtcdClient::call(std::string_view path, const std::string& body, bool idempotent,
                                     Deadline deadline) {
  const auto end = deadline.value_or(Clock::now() + options_.request_timeout);
  MutexLock lock(mutex_);
  std::string last_error = "no endpoint";
  // Each endpoint at most twice (a stale keep-alive connection fails once, then reconnects).
  for (std::size_t attempt = 0; attempt < 2 * endpoints_.size(); ++attempt) {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(end - Clock::now());
    if (left <= 0us) break;
    const std::size_t i = current_;
    auto& http = connections_[i]->http;
    auto connect = std::min<std::chrono::microseconds>(left, options_.connect_timeout);
    http.set_connection_timeout(connect.count() / 1000000, connect.count() % 1000000);
    http.set_read_timeout(left.count() / 1000000, left.count() % 1000000);
    http.set_write_timeout(left.count() / 1000000, left.count() % 1000000);
    auto res = http.Post(std::string(path), body, "application/json");
    const std::string where = fmt::format("{}:{}", endpoints_[i].host, endpoints_[i].port);
    if (!res) {
      auto err = res.error();
      last_error = fmt::format("{}: {}", where, httplib::to_string(err));
      bool never_sent = err == httplib::Error::Connection || err == httplib::Error::ConnectionTimeout ||
                        err == httplib::Error::Write;
      http.stop();  // drop the connection: the next call reconnects
      current_ = (current_ + 1) % endpoints_.size();
      if (never_sent || idempotent) continue;
      return make_error(ErrorCode::kUnavailable,
                        fmt::format("etcd: {} (outcome unknown: the request may have been applied)", last_error));
    }
    if (res->status == 200) return std::move(res->body);
    json reply = json::parse(res->body, nullptr, false);
    std::string message = reply.is_object() ? reply.value("message", res->body) : res->body;
    int grpc_code = reply.is_object() ? reply.value("code", 0) : 0;
    last_error = fmt::format("{}: {}", where, message);
    switch (classify_error_reply(res->status, message)) {
      case Reply::kRetryAnywhere:
        current_ = (current_ + 1) % endpoints_.size();
        continue;
      case Reply::kMaybeApplied:
        current_ = (current_ + 1) % endpoints_.size();
        if (idempotent) continue;
        return make_error(ErrorCode::kUnavailable,
                          fmt::format("etcd: {} (outcome unknown: the request may have been applied)", last_error));
      case Reply::kOk:
      case Reply::kFinal:
        break;
    }
    return make_error(code_for_final(grpc_code), fmt::format("etcd: {}", last_error));
  }
  return make_error(ErrorCode::kUnavailable,
                    fmt::format("etcd: no member of {} answered in time (last: {})", endpoints_text(), last_error));
}

namespace {

Result<json> parse_reply(const Result<std::string>& body) {
  if (!body) return tl::unexpected(body.error());
  json j = json::parse(*body, nullptr, false);
  if (!j.is_object()) return make_error(ErrorCode::kIo, "etcd: a reply is not a JSON object");
  return j;
}

}  // namespace

Result<EtcdRangeResult> EtcdClient::range(std::string_view key, std::string_view range_end, std::int64_t limit,
                                          std::int64_t revision, bool serializable, Deadline deadline) {
  json req = {{"key", base64_encode(key)}};
  if (!range_end.empty()) req["range_end"] = base64_encode(range_end);
  if (limit > 0) req["limit"] = std::to_string(limit);
  if (revision > 0) req["revision"] = std::to_string(revision);
  if (serializable) req["serializable"] = true;
  TOPOSCHED_TRY(reply, parse_reply(call("/v3/kv/range", req.dump(), true, deadline)));
  return parse_range(reply, header_revision(reply));
}

Result<std::int64_t> EtcdClient::put(std::string_view key, std::string_view value, std::int64_t lease,
                                     Deadline deadline) {
  json req = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) req["lease"] = std::to_string(lease);
  TOPOSCHED_TRY(reply, parse_reply(call("/v3/kv/put", req.dump(), true, deadline)));
  return header_revision(reply);
}

Result<EtcdTxnResult> EtcdClient::txn(const std::vector<EtcdCompare>& compares, const std::vector<EtcdOp>& success,
                                      const std::vector<EtcdOp>& failure, Deadline deadline) {
  json req = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : compares) req["compare"].push_back(compare_json(c));
  for (const auto& op : success) req["success"].push_back(op_json(op));
  for (const auto& op : failure) req["failure"].push_back(op_json(op));
  TOPOSCHED_TRY(reply, parse_reply(call("/v3/kv/txn", req.dump(), false, deadline)));
  EtcdTxnResult out;
  out.succeeded = reply.value("succeeded", false);
  out.revision = header_revision(reply);
  if (auto it = reply.find("responses"); it != reply.end())
    for (const auto& r : *it)
      if (auto range = r.find("response_range"); range != r.end()) {
        TOPOSCHED_TRY(parsed, parse_range(*range, out.revision));
        out.ranges.push_back(std::move(parsed));
      }
  return out;
}

Result<EtcdLease> EtcdClient::grant_lease(std::int64_t ttl_s, Deadline deadline) {
  json req = {{"TTL", std::to_string(ttl_s)}};
  TOPOSCHED_TRY(reply, parse_reply(call("/v3/lease/grant", req.dump(), false, deadline)));
  if (reply.contains("error") && !reply["error"].get<std::string>().empty())
    return make_error(ErrorCode::kUnavailable, "etcd: lease grant refused: " + reply["error"].get<std::string>());
  return EtcdLease{int_field(reply, "ID"), int_field(reply, "TTL")};
}

Result<std::int64_t> EtcdClient::keep_alive(std::int64_t lease_id, Deadline deadline) {
  json req = {{"ID", std::to_string(lease_id)}};
  TOPOSCHED_TRY(reply, parse_reply(call("/v3/lease/keepalive", req.dump(), true, deadline)));
  // A stream of one message: {"result": {"ID", "TTL"}}; TTL absent = the lease is gone.
  auto it = reply.find("result");
  if (it == reply.end()) {
    std::string why = reply.contains("error") ? reply["error"].dump() : reply.dump();
    return make_error(ErrorCode::kUnavailable, "etcd: lease keep-alive failed: " + why);
  }
  return int_field(*it, "TTL");
}

Result<void> EtcdClient::revoke_lease(std::int64_t lease_id, Deadline deadline) {
  json req = {{"ID", std::to_string(lease_id)}};
  auto reply = parse_reply(call("/v3/lease/revoke", req.dump(), true, deadline));
  if (!reply && reply.error().code != ErrorCode::kNotFound) return tl::unexpected(reply.error());
  return {};
}

}  // namespace toposched::service
