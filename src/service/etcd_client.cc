#include "service/etcd_client.h"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "formats/json_input.h"

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
Result<std::int64_t> int_field(const JsonFields& reply, std::string_view name) {
  const json* member = reply.find(name);
  if (!member) return 0;
  if (member->is_number_integer()) return reply.integer(name);
  std::int64_t v = 0;
  bool ok = member->is_string();
  if (ok) {
    const std::string& text = member->get_ref<const std::string&>();
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    ok = ec == std::errc() && end == text.data() + text.size();
  }
  if (!ok)
    return reply.error(name,
                       fmt::format("expected a 64-bit integer (a string of digits), found {}", quote_json(*member)));
  return v;
}

// A member that must be a JSON object when present (nullopt when absent).
Result<std::optional<JsonFields>> object_member(const JsonFields& reply, std::string_view name) {
  const json* member = reply.find(name);
  if (!member) return std::optional<JsonFields>();
  TOPOSCHED_TRY(fields, JsonFields::of(*member, fmt::format("{}, member '{}'", reply.source(), name)));
  return std::optional<JsonFields>(std::move(fields));
}

Result<std::string> bytes_field(const JsonFields& kv, std::string_view name) {
  TOPOSCHED_TRY(text, kv.opt_string(name));
  return base64_decode(text.value_or(""));
}

Result<EtcdKeyValue> parse_kv(const json& j, const std::string& source) {
  TOPOSCHED_TRY(fields, JsonFields::of(j, source));
  EtcdKeyValue kv;
  TOPOSCHED_TRY(key, bytes_field(fields, "key"));
  TOPOSCHED_TRY(value, bytes_field(fields, "value"));
  kv.key = std::move(key);
  kv.value = std::move(value);
  TOPOSCHED_TRY(create_revision, int_field(fields, "create_revision"));
  TOPOSCHED_TRY(mod_revision, int_field(fields, "mod_revision"));
  TOPOSCHED_TRY(version, int_field(fields, "version"));
  TOPOSCHED_TRY(lease, int_field(fields, "lease"));
  kv.create_revision = create_revision;
  kv.mod_revision = mod_revision;
  kv.version = version;
  kv.lease = lease;
  return kv;
}

Result<EtcdRangeResult> parse_range(const JsonFields& range, std::int64_t revision) {
  EtcdRangeResult r;
  r.revision = revision;
  if (const json* kvs = range.find("kvs")) {
    if (!kvs->is_array()) return range.error("kvs", fmt::format("expected an array, found {}", quote_json(*kvs)));
    for (std::size_t i = 0; i < kvs->size(); ++i) {
      TOPOSCHED_TRY(parsed, parse_kv((*kvs)[i], fmt::format("{}, kvs[{}]", range.source(), i)));
      r.kvs.push_back(std::move(parsed));
    }
  }
  TOPOSCHED_TRY(count, int_field(range, "count"));
  TOPOSCHED_TRY(more, range.opt_boolean("more"));
  r.count = count;
  r.more = more.value_or(false);
  return r;
}

Result<std::int64_t> header_revision(const JsonFields& reply) {
  TOPOSCHED_TRY(header, object_member(reply, "header"));
  if (!header) return 0;
  return int_field(*header, "revision");
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

// What a non-200 reply says: the gateway's {"code", "message"}. A body that is not that (a
// proxy's page, a cut reply) is the message as it is, since it is all there is to show and
// to classify; a reply that parses has its members' types checked like any other.
struct ErrorReply {
  std::string message;
  int grpc_code = 0;
};

ErrorReply error_reply(const std::string& body, const std::string& source) {
  auto doc = parse_json_document(body, source);
  if (!doc) return {body, 0};
  auto fields = JsonFields::of(*doc, source);
  if (!fields) return {body, 0};
  auto message = fields->opt_string("message");
  auto code = fields->opt_integer("code");
  if (!message) return {message.error().to_string() + "; the reply: " + body, 0};
  if (!code) return {code.error().to_string() + "; the reply: " + body, 0};
  const std::int64_t grpc_code = code->value_or(0);
  return {message->value_or(body), grpc_code >= 0 && grpc_code <= 16 ? static_cast<int>(grpc_code) : 0};
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
    const auto [message, grpc_code] = error_reply(res->body, fmt::format("etcd {} reply from {}", path, where));
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

std::string reply_source(std::string_view path) { return fmt::format("etcd {} reply", path); }

// The range results among a Txn's responses, in order.
Result<void> txn_ranges(const JsonFields& reply, EtcdTxnResult& out) {
  const json* responses = reply.find("responses");
  if (!responses) return {};
  if (!responses->is_array())
    return reply.error("responses", fmt::format("expected an array, found {}", quote_json(*responses)));
  for (std::size_t i = 0; i < responses->size(); ++i) {
    TOPOSCHED_TRY(response, JsonFields::of((*responses)[i], fmt::format("{}, responses[{}]", reply.source(), i)));
    TOPOSCHED_TRY(range, object_member(response, "response_range"));
    if (!range) continue;
    TOPOSCHED_TRY(parsed, parse_range(*range, out.revision));
    out.ranges.push_back(std::move(parsed));
  }
  return {};
}

// A successful reply, read strictly (JsonFields::of then checks it is one object).
Result<json> parse_reply(const Result<std::string>& body, std::string_view path) {
  if (!body) return tl::unexpected(body.error());
  return parse_json_document(*body, reply_source(path));
}

}  // namespace

Result<EtcdRangeResult> EtcdClient::range(std::string_view key, std::string_view range_end, std::int64_t limit,
                                          std::int64_t revision, bool serializable, Deadline deadline) {
  json req = {{"key", base64_encode(key)}};
  if (!range_end.empty()) req["range_end"] = base64_encode(range_end);
  if (limit > 0) req["limit"] = std::to_string(limit);
  if (revision > 0) req["revision"] = std::to_string(revision);
  if (serializable) req["serializable"] = true;
  const std::string_view path = "/v3/kv/range";
  TOPOSCHED_TRY(doc, parse_reply(call(path, req.dump(), true, deadline), path));
  TOPOSCHED_TRY(reply, JsonFields::of(doc, reply_source(path)));
  TOPOSCHED_TRY(read_at, header_revision(reply));
  return parse_range(reply, read_at);
}

Result<std::int64_t> EtcdClient::put(std::string_view key, std::string_view value, std::int64_t lease,
                                     Deadline deadline) {
  json req = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) req["lease"] = std::to_string(lease);
  const std::string_view path = "/v3/kv/put";
  TOPOSCHED_TRY(doc, parse_reply(call(path, req.dump(), true, deadline), path));
  TOPOSCHED_TRY(reply, JsonFields::of(doc, reply_source(path)));
  return header_revision(reply);
}

Result<EtcdTxnResult> EtcdClient::txn(const std::vector<EtcdCompare>& compares, const std::vector<EtcdOp>& success,
                                      const std::vector<EtcdOp>& failure, Deadline deadline) {
  json req = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : compares) req["compare"].push_back(compare_json(c));
  for (const auto& op : success) req["success"].push_back(op_json(op));
  for (const auto& op : failure) req["failure"].push_back(op_json(op));
  const std::string_view path = "/v3/kv/txn";
  TOPOSCHED_TRY(doc, parse_reply(call(path, req.dump(), false, deadline), path));
  TOPOSCHED_TRY(reply, JsonFields::of(doc, reply_source(path)));
  EtcdTxnResult out;
  TOPOSCHED_TRY(succeeded, reply.opt_boolean("succeeded"));
  TOPOSCHED_TRY(revision, header_revision(reply));
  out.succeeded = succeeded.value_or(false);
  out.revision = revision;
  TOPOSCHED_CHECK(txn_ranges(reply, out));
  return out;
}

Result<EtcdLease> EtcdClient::grant_lease(std::int64_t ttl_s, Deadline deadline) {
  json req = {{"TTL", std::to_string(ttl_s)}};
  const std::string_view path = "/v3/lease/grant";
  TOPOSCHED_TRY(doc, parse_reply(call(path, req.dump(), false, deadline), path));
  TOPOSCHED_TRY(reply, JsonFields::of(doc, reply_source(path)));
  TOPOSCHED_TRY(refused, reply.opt_string("error"));
  if (refused && !refused->empty()) return make_error(ErrorCode::kUnavailable, "etcd: lease grant refused: " + *refused);
  TOPOSCHED_TRY(id, int_field(reply, "ID"));
  TOPOSCHED_TRY(ttl, int_field(reply, "TTL"));
  return EtcdLease{id, ttl};
}

Result<std::int64_t> EtcdClient::keep_alive(std::int64_t lease_id, Deadline deadline) {
  json req = {{"ID", std::to_string(lease_id)}};
  const std::string_view path = "/v3/lease/keepalive";
  TOPOSCHED_TRY(doc, parse_reply(call(path, req.dump(), true, deadline), path));
  TOPOSCHED_TRY(reply, JsonFields::of(doc, reply_source(path)));
  // A stream of one message: {"result": {"ID", "TTL"}}; TTL absent = the lease is gone.
  TOPOSCHED_TRY(result, object_member(reply, "result"));
  if (!result) {
    // The gateway's error is an object; its dump is short and says why (lease not found).
    const json* error = reply.find("error");
    const std::string why = (error ? error : &doc)->dump(-1, ' ', false, json::error_handler_t::replace);
    return make_error(ErrorCode::kUnavailable, "etcd: lease keep-alive failed: " + why);
  }
  return int_field(*result, "TTL");
}

Result<void> EtcdClient::revoke_lease(std::int64_t lease_id, Deadline deadline) {
  json req = {{"ID", std::to_string(lease_id)}};
  auto reply = parse_reply(call("/v3/lease/revoke", req.dump(), true, deadline), "/v3/lease/revoke");
  if (!reply && reply.error().code != ErrorCode::kNotFound) return tl::unexpected(reply.error());
  return {};
}

}  // namespace toposched::service
