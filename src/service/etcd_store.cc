#include "service/etcd_store.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/json_input.h"
#include "service/replication.h"

namespace toposched::service {
namespace {

using json = nlohmann::json;
using Cmp = EtcdCompare;
constexpr std::int64_t kPageSize = 500;

std::string seq_key_suffix(std::int64_t seq) { return fmt::format("events/{:020d}", seq); }

std::string job_to_json(const JobRecord& job, std::int64_t seq) {
  return json{{"id", job.id},
              {"gpus", job.gpus_by_rank},
              {"request", job.request_json},
              {"placement", job.placement_json},
              {"created_unix_ms", job.created_unix_ms},
              {"seq", seq}}
      .dump();
}

// Where a record came from, for errors: "etcd key /toposched/jobs/a".
std::string record_source(const EtcdKeyValue& kv) { return "etcd key " + kv.key; }

Result<std::pair<JobRecord, std::int64_t>> job_from_json(const EtcdKeyValue& kv) {
  const std::string source = record_source(kv);
  TOPOSCHED_TRY(doc, parse_json_document(kv.value, source));
  TOPOSCHED_TRY(record, JsonFields::of(doc, source));
  JobRecord job;
  TOPOSCHED_TRY(id, record.string("id"));
  TOPOSCHED_TRY(gpus, record.strings("gpus"));
  // Records of every version hold id and gpus; the other members default as they were written.
  TOPOSCHED_TRY(request, record.opt_string("request"));
  TOPOSCHED_TRY(placement, record.opt_string("placement"));
  TOPOSCHED_TRY(created, record.opt_integer("created_unix_ms"));
  TOPOSCHED_TRY(seq, record.opt_integer("seq"));
  job.id = std::move(id);
  job.gpus_by_rank = std::move(gpus);
  job.request_json = request.value_or("");
  job.placement_json = placement.value_or("");
  job.created_unix_ms = created.value_or(0);
  return std::pair{std::move(job), seq.value_or(0)};
}

std::string node_mark_key_suffix(const NodeMarkRecord& m) { return "node-marks/" + m.source + "/" + m.node; }

std::string node_mark_to_json(const NodeMarkRecord& m) {
  return json{{"node", m.node}, {"source", m.source}, {"reason", m.reason}, {"since_unix_ms", m.since_unix_ms}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

Result<NodeMarkRecord> node_mark_from_json(const EtcdKeyValue& kv) {
  const std::string source = record_source(kv);
  TOPOSCHED_TRY(doc, parse_json_document(kv.value, source));
  TOPOSCHED_TRY(record, JsonFields::of(doc, source));
  TOPOSCHED_TRY(node, record.string("node"));
  TOPOSCHED_TRY(mark_source, record.string("source"));
  TOPOSCHED_TRY(reason, record.opt_string("reason"));
  TOPOSCHED_TRY(since, record.opt_integer("since_unix_ms"));
  return NodeMarkRecord{std::move(node), std::move(mark_source), reason.value_or(""), since.value_or(0)};
}

bool is_node_mutation(const Mutation& m) {
  return m.kind == Mutation::Kind::kMarkNode || m.kind == Mutation::Kind::kUnmarkNode;
}

// The event log entry of one mutation, as PREFIX/events/<seq> holds it (for a node mark,
// "job" names the node).
std::string event_json(std::int64_t seq, std::string_view kind, std::string_view subject, std::string_view body,
                       std::int64_t unix_ms) {
  json ev = {{"seq", seq}, {"kind", kind}, {"job", subject}, {"body", body}, {"unix_ms", unix_ms}};
  return ev.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<StoreEvent> event_from_json(const EtcdKeyValue& kv) {
  const std::string source = record_source(kv);
  TOPOSCHED_TRY(doc, parse_json_document(kv.value, source));
  TOPOSCHED_TRY(record, JsonFields::of(doc, source));
  TOPOSCHED_TRY(seq, record.integer("seq"));
  TOPOSCHED_TRY(kind, record.string("kind"));
  TOPOSCHED_TRY(job, record.string("job"));
  TOPOSCHED_TRY(body, record.string("body"));
  TOPOSCHED_TRY(unix_ms, record.integer("unix_ms"));
  return StoreEvent{seq, std::move(kind), std::move(job), std::move(body), unix_ms};
}

// The seq key holds the last event's number in decimal; no key yet is 0.
Result<std::int64_t> parse_seq(const std::vector<EtcdKeyValue>& kvs) {
  if (kvs.empty()) return 0;
  const std::string& text = kvs[0].value;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    return make_error(ErrorCode::kParse,
                      fmt::format("expected a sequence number (a decimal integer >= 0), found '{}'", text.substr(0, 40)),
                      SourceLocation{record_source(kvs[0]), 0, 0});
  return v;
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a batch does to each job id: whether the id must exist before, and its final record.
struct NetEffect {
  bool must_exist_before = false;
  std::optional<JobRecord> after;  // nullopt: absent after the batch
  std::int64_t place_seq = 0;
};

}  // namespace

Result<EtcdStoreUrl> parse_etcd_store_url(std::string_view url) {
  constexpr std::string_view kScheme = "etcd://";
  if (!url.starts_with(kScheme))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("store '{}': expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]", url));
  url.remove_prefix(kScheme.size());
  EtcdStoreUrl out;
  std::size_t slash = url.find('/');
  if (slash != std::string_view::npos) {
    std::string_view prefix = url.substr(slash);
    while (prefix.size() > 1 && prefix.ends_with('/')) prefix.remove_suffix(1);
    if (prefix == "/")
      return make_error(ErrorCode::kInvalidArgument, fmt::format("store 'etcd://{}': the prefix is empty", url));
    out.prefix = std::string(prefix);
    url = url.substr(0, slash);
  }
  TOPOSCHED_TRY(endpoints, parse_etcd_endpoints(url));
  out.endpoints = std::move(endpoints);
  return out;
}

EtcdStore::EtcdStore(EtcdStoreUrl url, EtcdClient::Options options)
    : url_(std::move(url)), options_(options), client_(url_.endpoints, options), reader_(url_.endpoints, options) {
  event_log_limit_ = kDefaultEventLogLimit;
}

EtcdStore::~EtcdStore() {
  if (election_) election_->stop();
}

void EtcdStore::start_election(std::string identity, std::chrono::seconds ttl) {
  if (election_) return;
  LeaderElection::Options o;
  o.key = key("leader");
  o.identity = std::move(identity);
  o.ttl = ttl;
  election_ = std::make_unique<LeaderElection>(url_.endpoints, options_, std::move(o));
  election_->start();
}

Result<void> EtcdStore::bind_cluster(const Cluster& cluster) {
  TOPOSCHED_CHECK(bind_digest(cluster.name(), cluster_digest(cluster)));
  cluster_ = &cluster;
  return {};
}

Result<void> EtcdStore::bind_digest(std::string_view cluster_name, std::string_view spec_digest) {
  const std::string k = key("cluster");
  std::string value = json{{"name", cluster_name}, {"digest", spec_digest}}.dump();
  TOPOSCHED_TRY(r, client_.txn({{k, Cmp::Target::kCreate, Cmp::Op::kEqual, 0, {}}}, {EtcdOp::put(k, value)},
                               {EtcdOp::get(k)}));
  if (r.succeeded) return {};
  if (r.ranges.empty() || r.ranges[0].kvs.empty()) return bind_digest(cluster_name, spec_digest);  // deleted meanwhile
  const EtcdKeyValue& bound = r.ranges[0].kvs[0];
  TOPOSCHED_TRY(held, parse_json_document(bound.value, record_source(bound)));
  TOPOSCHED_TRY(binding, JsonFields::of(held, record_source(bound)));
  TOPOSCHED_TRY(held_name, binding.string("name"));
  TOPOSCHED_TRY(held_digest, binding.string("digest"));
  if (held_digest == spec_digest) return {};
  return make_error(ErrorCode::kValidation,
                    fmt::format("etcd store {} (prefix {}) belongs to cluster '{}' (digest {}), not to '{}' "
                                "(digest {}); use another prefix or the matching cluster spec",
                                client_.endpoints_text(), url_.prefix, held_name, held_digest, cluster_name,
                                spec_digest));
}

Result<std::vector<JobRecord>> EtcdStore::load(bool serializable) {
  const std::string jobs = key("jobs/"), jobs_end = etcd_prefix_end(jobs), seq_key = key("seq");
  EtcdClient& c = serializable ? reader_ : client_;
  // The seq key and the first page at one revision; later pages read that same revision.
  TOPOSCHED_TRY(seq, c.range(seq_key, {}, 0, 0, serializable));
  TOPOSCHED_TRY(page, c.range(jobs, jobs_end, kPageSize, seq.revision, serializable));
  std::vector<std::pair<JobRecord, std::int64_t>> found;
  for (;;) {
    for (const auto& kv : page.kvs) {
      TOPOSCHED_TRY(job, job_from_json(kv));
      found.push_back(std::move(job));
    }
    if (!page.more || page.kvs.empty()) break;
    std::string next = page.kvs.back().key + std::string(1, '\0');
    TOPOSCHED_TRY(more, c.range(next, jobs_end, kPageSize, seq.revision, serializable));
    page = std::move(more);
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (!serializable) {
    TOPOSCHED_TRY(last_seq, parse_seq(seq.kvs));
    seq_ = last_seq;
    seq_mod_revision_ = seq.kvs.empty() ? 0 : seq.kvs[0].mod_revision;
    loaded_ = true;
    auto term = election_ ? election_->term() : std::nullopt;
    loaded_generation_ = term ? term->generation : 0;
  }
  std::vector<JobRecord> out;
  out.reserve(found.size());
  for (auto& [job, s] : found) out.push_back(std::move(job));
  return out;
}

Result<std::vector<JobRecord>> EtcdStore::load_jobs() { return load(false); }
Result<std::vector<JobRecord>> EtcdStore::load_jobs_local() { return load(true); }

Result<std::vector<NodeMarkRecord>> EtcdStore::load_marks(bool serializable) {
  const std::string from = key("node-marks/"), end = etcd_prefix_end(from);
  EtcdClient& c = serializable ? reader_ : client_;
  TOPOSCHED_TRY(page, c.range(from, end, kPageSize, 0, serializable));
  const std::int64_t revision = page.revision;  // later pages read the first one's revision
  std::vector<NodeMarkRecord> marks;
  for (;;) {
    for (const auto& kv : page.kvs) {
      TOPOSCHED_TRY(mark, node_mark_from_json(kv));
      marks.push_back(std::move(mark));
    }
    if (!page.more || page.kvs.empty()) break;
    TOPOSCHED_TRY(more, c.range(page.kvs.back().key + std::string(1, '\0'), end, kPageSize, revision, serializable));
    page = std::move(more);
  }
  std::sort(marks.begin(), marks.end(), [](const NodeMarkRecord& a, const NodeMarkRecord& b) {
    return std::tie(a.node, a.source) < std::tie(b.node, b.source);
  });
  return marks;
}

Result<std::vector<NodeMarkRecord>> EtcdStore::load_node_marks() { return load_marks(false); }
Result<std::vector<NodeMarkRecord>> EtcdStore::load_node_marks_local() { return load_marks(true); }

Result<std::int64_t> EtcdStore::data_revision() {
  TOPOSCHED_TRY(r, reader_.range(key("seq"), {}, 0, 0, true));
  return r.kvs.empty() ? 0 : r.kvs[0].mod_revision;
}

Result<std::vector<StoreEvent>> EtcdStore::events(std::int64_t after_seq, std::size_t limit) {
  const std::string from = key(seq_key_suffix(after_seq + 1)), end = etcd_prefix_end(key("events/"));
  TOPOSCHED_TRY(r, reader_.range(from, end, static_cast<std::int64_t>(limit)));
  std::vector<StoreEvent> out;
  for (const auto& kv : r.kvs) {
    TOPOSCHED_TRY(event, event_from_json(kv));
    out.push_back(std::move(event));
  }
  return out;
}

// long: one etcd Txn built, sent and its outcome applied; splitting would pass the Txn's parts around
Result<void> EtcdStore::commit(std::span<const Mutation> batch) {
  TOPOSCHED_CHECK(check_bound());
  if (batch.empty()) return {};
  if (batch.size() > kMaxBatch)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("etcd store: {} mutations in one commit; at most {}", batch.size(), kMaxBatch));
  auto term = election_ ? election_->term() : std::nullopt;
  if (!term) {
    std::string leader = election_ ? election_->leader() : "";
    return make_error(ErrorCode::kUnavailable,
                      leader.empty() ? "this replica is not the leader, and no leader is known now"
                                     : fmt::format("this replica is not the leader; the leader is {}", leader));
  }
  if (!loaded_ || loaded_generation_ != term->generation)
    return make_error(ErrorCode::kUnavailable, "this replica has not loaded the state in its current term");

  // Net effect per id, checking the batch against itself.
  std::map<std::string, NetEffect> effect;
  std::vector<std::string> order;  // ids in first-touch order
  std::map<std::string, std::optional<std::string>> marks;  // node-mark key -> its value after the batch (nullopt: gone)
  std::vector<EtcdOp> ops;
  const std::int64_t unix_ms = now_unix_ms();
  std::int64_t seq = seq_;
  // The oldest event the log keeps after this commit. A batch longer than the log keeps
  // writes only its newest events: etcd refuses a Txn that puts a key inside a range it
  // deletes.
  const std::int64_t first_kept =
      event_log_limit_ > 0 ? seq_ + static_cast<std::int64_t>(batch.size()) - event_log_limit_ + 1 : 1;
  for (const Mutation& m : batch) {
    if (is_node_mutation(m)) {
      const bool mark = m.kind == Mutation::Kind::kMarkNode;
      const NodeMarkRecord record = node_mark_record(*cluster_, m);
      const std::string body = node_mark_to_json(record);
      marks[key(node_mark_key_suffix(record))] = mark ? std::optional(body) : std::nullopt;
      if (++seq >= first_kept)
        ops.push_back(EtcdOp::put(key(seq_key_suffix(seq)), event_json(seq, mark ? "mark-node" : "unmark-node",
                                                                       record.node, body, unix_ms)));
      continue;
    }
    const bool place = m.kind == Mutation::Kind::kPlace;
    auto [it, first] = effect.try_emplace(m.job_id);
    if (first) {
      order.push_back(m.job_id);
      it->second.must_exist_before = !place;
    } else if (place == it->second.after.has_value()) {
      return make_error(ErrorCode::kConflict, fmt::format("job '{}' is {} twice in one commit", m.job_id,
                                                          place ? "placed" : "released"));
    }
    ++seq;
    if (place) {
      it->second.after = job_record(*cluster_, m, unix_ms);
      it->second.place_seq = seq;
    } else {
      it->second.after.reset();
    }
    if (seq >= first_kept)
      ops.push_back(EtcdOp::put(key(seq_key_suffix(seq)), event_json(seq, place ? "place" : "release", m.job_id,
                                                                     place ? m.answer_json : std::string(), unix_ms)));
  }
  const std::string leader_key = key("leader"), seq_key = key("seq");
  std::vector<EtcdCompare> compares{
      {leader_key, Cmp::Target::kCreate, Cmp::Op::kEqual, term->key_revision, {}},
      {seq_key, Cmp::Target::kMod, Cmp::Op::kEqual, seq_mod_revision_, {}},
  };
  std::vector<EtcdOp> diagnose{EtcdOp::get(leader_key), EtcdOp::get(seq_key)};
  for (const auto& id : order) {
    const NetEffect& e = effect[id];
    const std::string k = key("jobs/" + id);
    compares.push_back({k, Cmp::Target::kCreate, e.must_exist_before ? Cmp::Op::kNotEqual : Cmp::Op::kEqual, 0, {}});
    if (e.after)
      ops.push_back(EtcdOp::put(k, job_to_json(*e.after, e.place_seq)));
    else if (e.must_exist_before)
      ops.push_back(EtcdOp::erase(k));
    diagnose.push_back(EtcdOp::get(k));
  }
  // Node marks need no compare: setting or lifting one is idempotent, and the seq compare
  // above already fences the batch.
  for (const auto& [k, value] : marks) ops.push_back(value ? EtcdOp::put(k, *value) : EtcdOp::erase(k));
  // Events that fall out of the kept window go in the same Txn (the range holds only the ones
  // this commit pushes out, since every earlier commit deleted its own).
  if (first_kept > 1 && first_kept > events_trimmed_below_)
    ops.push_back(EtcdOp::erase(key(seq_key_suffix(events_trimmed_below_)), key(seq_key_suffix(first_kept))));
  ops.push_back(EtcdOp::put(seq_key, std::to_string(seq)));
  auto deadline = std::min(EtcdClient::Clock::now() + options_.request_timeout, term->valid_until);
  auto txn = client_.txn(compares, ops, diagnose, deadline);
  if (!txn) {
    loaded_ = false;  // it may have been applied: reload before the next decision
    return tl::unexpected(txn.error());
  }
  const EtcdTxnResult& r = *txn;
  if (!r.succeeded) {
    std::vector<std::pair<std::string, bool>> expected;
    for (const auto& id : order) expected.emplace_back(id, effect[id].must_exist_before);
    return diagnose_failed_commit(r, *term, expected);
  }
  seq_ = seq;
  seq_mod_revision_ = r.revision;
  if (first_kept > 1) events_trimmed_below_ = std::max(events_trimmed_below_, first_kept);
  return {};
}

Result<void> EtcdStore::diagnose_failed_commit(const EtcdTxnResult& r, const LeaderElection::Term& term,
                                               const std::vector<std::pair<std::string, bool>>& ids) {
  if (r.ranges.size() < 2 + ids.size()) return make_error(ErrorCode::kIo, "etcd store: a failed Txn's reply is short");
  const auto& leader = r.ranges[0].kvs;
  if (leader.empty() || leader[0].create_revision != term.key_revision) {
    election_->resign();
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("this replica lost leadership (the leader is now {})",
                                  leader.empty() ? "nobody" : leader[0].value));
  }
  const auto& seq = r.ranges[1].kvs;
  if ((seq.empty() ? 0 : seq[0].mod_revision) != seq_mod_revision_) {
    loaded_ = false;
    election_->resign();
    return make_error(ErrorCode::kUnavailable, "the etcd store changed under this replica; it reloads and retries");
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    bool exists = !r.ranges[2 + i].kvs.empty();
    if (exists != ids[i].second)
      return make_error(ErrorCode::kConflict, exists ? fmt::format("job '{}' already exists", ids[i].first)
                                                     : fmt::format("job '{}' does not exist", ids[i].first));
  }
  return make_error(ErrorCode::kIo, "etcd store: a commit failed for no reason the store can see");
}

Result<std::unique_ptr<Store>> open_etcd_store(std::string_view rest) {
  TOPOSCHED_TRY(parsed, parse_etcd_store_url("etcd://" + std::string(rest)));
  return std::make_unique<EtcdStore>(std::move(parsed), EtcdClient::Options{});
}

std::shared_ptr<Replica> EtcdStore::replicate(const ReplicaOptions& options, Engine& engine) {
  start_election(options.advertise, options.lease_ttl);
  return std::make_shared<Replication>(*this, engine);
}

}  // namespace toposched::service
