#include "placement/engine.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "formats/json_input.h"
#include "formats/json_output.h"

#include "placement/place_within.h"
#include "placement/slurm_alignment.h"
#include "topology/hostlist.h"

namespace toposched {

namespace {
using OrderedJson = nlohmann::ordered_json;

// For answers built from names already checked or from the cluster spec: a name that is not
// UTF-8 shows with U+FFFD rather than failing a read.
std::string dump_lenient(const OrderedJson& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

OrderedJson number_or_null(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? OrderedJson(*v) : OrderedJson(nullptr);
}

std::string first_free_job_id(const AllocationState& state) {
  for (int k = 1;; ++k) {
    std::string id = fmt::format("job-{}", k);
    if (!state.has_job(id)) return id;
  }
}

// Sets `mark` on `node` (lift: removes the mark of mark.source).
Mutation node_mark_change(NodeId node, NodeMark mark, bool lift) {
  Mutation c;
  c.kind = lift ? Mutation::Kind::kUnmarkNode : Mutation::Kind::kMarkNode;
  c.node = node;
  c.mark = std::move(mark);
  return c;
}

bool is_node_change(const Mutation& c) {
  return c.kind == Mutation::Kind::kMarkNode || c.kind == Mutation::Kind::kUnmarkNode;
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The `release` JSON; `free_gpus` counts the cluster's free GPUs after the release.
std::string release_json(const Cluster& c, std::int64_t free_gpus, std::string_view job, std::span<const GpuId> gpus) {
  std::vector<std::string> nodes;
  for (GpuId g : gpus) {
    const std::string& n = c.node_name(c.gpu_node(g));
    if (nodes.empty() || nodes.back() != n) nodes.push_back(n);
  }
  OrderedJson out;
  out["job"] = job;
  out["released_gpus"] = gpus.size();
  out["nodes"] = compress_hostlist(nodes);
  out["free_gpus"] = free_gpus;
  return out.dump();
}
}  // namespace

Result<PlaceRequest> place_request_from_json(const nlohmann::json& body) {
  if (!body.is_object())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("expected a JSON object of place options, found {}", body.type_name()));
  PlaceRequest r;
  for (const auto& [key, value] : body.items()) {
    const JobField* field = find_job_field(key);
    if (!field) {
      std::string known;
      for (const JobField& f : job_fields()) known += (known.empty() ? "" : ", ") + std::string(f.key);
      return make_error(ErrorCode::kInvalidArgument, fmt::format("unknown key '{}'; known keys: {}", key, known));
    }
    TOPOSCHED_CHECK(set_job_field_from_json(*field, value, r));
  }
  if ((r.job.gpus > 0) == (r.job.nodes > 0))
    return make_error(ErrorCode::kInvalidArgument, "give exactly one of 'gpus' (a GPU count) or 'nodes' (whole nodes)");
  return r;
}

nlohmann::ordered_json place_request_to_json(const PlaceRequest& request) {
  OrderedJson out = OrderedJson::object();
  for (const JobField& f : job_fields()) write_job_field_json(f, request, out);
  return out;
}

nlohmann::ordered_json placement_to_json(const Cluster& c, const Placement& p) {
  OrderedJson out;
  out["job"] = p.job_id;
  out["policy"] = p.policy;
  OrderedJson gpus = OrderedJson::array();
  for (std::size_t rank = 0; rank < p.gpus_by_rank.size(); ++rank) {
    GpuId g = p.gpus_by_rank[rank];
    gpus.push_back({{"node", c.node_name(c.gpu_node(g))}, {"gpu", c.gpu_local_index(g)}, {"rank", rank}});
  }
  out["gpus"] = std::move(gpus);
  out["nodes"] = p.nodes_hostlist;
  out["predicted_comm_us"] = number_or_null(p.predicted_comm_us);
  out["ideal_comm_us"] = number_or_null(p.ideal_comm_us);
  out["slowdown"] = number_or_null(p.slowdown);
  OrderedJson cvd = OrderedJson::object();
  for (const auto& [node, dev] : p.cuda_visible_devices) cvd[node] = dev;
  out["cuda_visible_devices"] = std::move(cvd);
  out["levels"] = p.levels_spanned;
  out["tiers_spanned"] = p.tiers_spanned;
  out["node_count"] = p.node_count;
  out["leaf_switches"] = p.leaf_switch_count;
  out["tp_groups_split"] = p.tp_groups_split;
  out["max_stage_leaves"] = p.max_stage_leaves;
  out["explanation"] = p.explanation;
  return out;
}

std::string gpu_name(const Cluster& c, GpuId g) {
  return fmt::format("{}:{}", c.node_name(c.gpu_node(g)), c.gpu_local_index(g));
}

Result<GpuId> parse_gpu(const Cluster& cluster, std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("expected a GPU as NODE:INDEX (e.g. dgx-h100-001:3), found '{}'", text));
  std::string_view node_name = text.substr(0, colon);
  std::string_view index_text = text.substr(colon + 1);
  auto node = cluster.find_node(node_name);
  if (!node)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("no node named '{}' in cluster '{}'", node_name, cluster.name()));
  int index = 0;
  auto [ptr, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  if (ec != std::errc() || ptr != index_text.data() + index_text.size())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("expected a GPU index after '{}:', found '{}'", node_name, index_text));
  int count = cluster.node_gpu_count(*node);
  if (index < 0 || index >= count)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("node '{}' has GPUs 0..{}, not {}", node_name, count - 1, index));
  return cluster.node_gpu(*node, index);
}

Result<Placement> place_job(AllocationState& state, const PlaceRequest& request, bool hold, PlaceDetail detail) {
  TOPOSCHED_TRY(found, find_policy(request.policy));
  std::optional<SlurmAlignedPolicy> aligned;
  if (request.slurm_aligned) aligned.emplace(*found);
  const PlacementPolicy* policy = aligned ? &*aligned : found;
  JobRequest r = request.job;
  if (r.job_id.empty()) {
    r.job_id = first_free_job_id(state);
  } else if (state.has_job(r.job_id)) {
    return make_error(ErrorCode::kConflict,
                      fmt::format("job '{}' is already placed; release it first or pick another job id", r.job_id));
  }
  TOPOSCHED_TRY(norm, normalize(r, state.cluster()));
  TOPOSCHED_TRY(allowed, allowed_nodes(state.cluster(), norm, request.allowed));
  auto p = place_within(state, norm, *policy, allowed, detail, request.blocked_gpus);
  if (!p) {
    Error e = p.error();
    e.message = fmt::format("cannot place job '{}' with policy {}: {}", r.job_id, request.policy, e.message);
    return tl::unexpected(std::move(e));
  }
  if (hold) TOPOSCHED_CHECK(state.allocate(p->job_id, p->gpus_by_rank));
  return std::move(*p);
}

namespace {
// A job placed elsewhere: its GPUs as given, checked free and distinct by allocate().
Result<Placement> hold_job(AllocationState& state, const PlaceRequest& request, std::span<const GpuId> gpus, bool hold) {
  const std::string& id = request.job.job_id;
  if (id.empty()) return make_error(ErrorCode::kInvalidArgument, "a held job needs a job id");
  if (state.has_job(id))
    return make_error(ErrorCode::kConflict, fmt::format("job '{}' is already placed", id));
  if (hold) TOPOSCHED_CHECK(state.allocate(id, gpus));
  Placement p;
  p.job_id = id;
  p.policy = request.policy;
  p.gpus_by_rank.assign(gpus.begin(), gpus.end());
  std::vector<std::string> nodes;
  for (GpuId g : gpus) {
    const std::string& n = state.cluster().node_name(state.cluster().gpu_node(g));
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  p.nodes_hostlist = compress_hostlist(nodes);
  p.node_count = static_cast<int>(nodes.size());
  return p;
}
}  // namespace

Engine::Engine(const Cluster& cluster, AllocationState state)
    : cluster_(&cluster), state_(cluster), availability_(cluster.node_count()) {
  std::vector<Mutation> changes;
  for (const std::string& id : state.job_ids()) {
    Placement p;
    p.job_id = id;
    auto gpus = state.job_gpus(id);
    p.gpus_by_rank.assign(gpus.begin(), gpus.end());
    changes.push_back(Mutation::place_of(id, p.gpus_by_rank, placement_to_json(*cluster_, p).dump(), 0));
  }
  // The jobs come from a consistent state: they fit.
  (void)apply_locked(changes);
}

Result<void> Engine::apply_one(const Mutation& c) {
  if (is_node_change(c)) {
    if (c.node.index() >= cluster_->node_count())
      return make_error(ErrorCode::kInvalidArgument, fmt::format("no node {} in the cluster", c.node.index()));
    availability_.set(c.node, c.mark.source,
                      c.kind == Mutation::Kind::kUnmarkNode ? std::nullopt : std::optional<NodeMark>(c.mark));
    return {};
  }
  if (c.kind == Mutation::Kind::kPlace) {
    TOPOSCHED_CHECK(state_.allocate(c.job_id, c.gpus_by_rank, c.order));
    answers_[c.job_id] = c.answer_json;
    return {};
  }
  TOPOSCHED_CHECK(state_.release(c.job_id));
  answers_.erase(c.job_id);
  return {};
}

Mutation Engine::inverse_of(const Mutation& c) const {
  if (is_node_change(c)) {
    const NodeMark* before =
        c.node.index() < cluster_->node_count() ? availability_.mark(c.node, c.mark.source) : nullptr;
    return before ? node_mark_change(c.node, *before, false) : node_mark_change(c.node, NodeMark{c.mark.source, {}, 0}, true);
  }
  if (c.kind == Mutation::Kind::kPlace) return Mutation::release_of(c.job_id);
  auto gpus = state_.job_gpus(c.job_id);
  auto answer = answers_.find(c.job_id);
  return Mutation::place_of(c.job_id, std::vector<GpuId>(gpus.begin(), gpus.end()),
                      answer == answers_.end() ? std::string() : answer->second, state_.job_order(c.job_id));
}

Result<void> Engine::apply_locked(std::span<const Mutation> changes) {
  std::vector<Mutation> undo;
  undo.reserve(changes.size());
  for (const Mutation& c : changes) {
    Mutation inverse = inverse_of(c);
    if (auto ok = apply_one(c); !ok) {
      for (auto it = undo.rbegin(); it != undo.rend(); ++it) (void)apply_one(*it);
      return ok;
    }
    undo.push_back(std::move(inverse));
  }
  return {};
}

Result<void> Engine::apply(std::span<const Mutation> changes) {
  WriterLock lock(mutex_);
  return apply_locked(changes);
}

Result<Decision> Engine::decide_command(const Command& command, std::vector<Mutation>& change,
                                        std::vector<Mutation>& inverse) const {
  auto start = std::chrono::steady_clock::now();
  if (command.kind == Command::Kind::kSetNodeAvailability) return decide_availability(command, change, inverse);
  Decision d;
  d.kind = command.kind;
  d.dry_run = command.dry_run;
  // Deciding reads the state (place_job without holding); the change is applied after.
  auto& state = const_cast<AllocationState&>(state_);
  if (command.kind == Command::Kind::kPlace) {
    const bool held_elsewhere = !command.hold_gpus.empty();
    if (!command.assume_released.empty() && (!command.dry_run || held_elsewhere))
      return make_error(ErrorCode::kInvalidArgument, "assume_released is for dry runs that place with a policy");
    std::optional<AllocationState> what_if;
    if (!command.assume_released.empty()) {
      what_if.emplace(state_.snapshot());
      for (const std::string& job : command.assume_released) (void)what_if->release(job);  // unknown: frees nothing
    }
    AllocationState& decide_on = what_if ? *what_if : state;
    std::optional<PlaceRequest> on_available_nodes;
    if (!held_elsewhere && availability_.unavailable_count() > 0) {
      on_available_nodes.emplace(command.place);
      on_available_nodes->allowed = availability_.narrow(command.place.allowed, command.caller_judges_source);
    }
    auto placed = held_elsewhere ? hold_job(state, command.place, command.hold_gpus, false)
                                 : place_job(decide_on, on_available_nodes ? *on_available_nodes : command.place,
                                             false, command.detail);
    if (!placed && placed.error().code == ErrorCode::kInfeasible && on_available_nodes)
      placed.error().message += fmt::format(" ({} unavailable node(s) excluded)",
                                            availability_.unavailable_count());
    TOPOSCHED_TRY(p, std::move(placed));
    PlaceRequest normalised = command.place;
    normalised.job.job_id = p.job_id;
    d.job_id = p.job_id;
    // dump_json refuses (exit 1, naming the key) a string that is not UTF-8, e.g. a job id.
    TOPOSCHED_TRY(request_json, dump_json(place_request_to_json(held_elsewhere ? command.place : normalised)));
    TOPOSCHED_TRY(answer_json, dump_json(placement_to_json(*cluster_, p)));
    d.request_json = std::move(request_json);
    d.answer_json = std::move(answer_json);
    d.gpus_by_rank = std::move(p.gpus_by_rank);
    if (!command.dry_run) {
      change.push_back(Mutation::place_of(d.job_id, d.gpus_by_rank, d.answer_json, 0));
      change.back().request_json = d.request_json;
      inverse.push_back(Mutation::release_of(d.job_id));
    }
  } else {
    if (!state_.has_job(command.job_id))
      return make_error(ErrorCode::kNotFound, fmt::format("no job '{}' in the allocation state", command.job_id));
    auto gpus = state_.job_gpus(command.job_id);
    d.job_id = command.job_id;
    d.gpus_by_rank.assign(gpus.begin(), gpus.end());
    d.answer_json = release_json(*cluster_, state_.total_free_gpus() + static_cast<std::int64_t>(gpus.size()),
                                 d.job_id, d.gpus_by_rank);
    Mutation release = Mutation::release_of(d.job_id);
    inverse.push_back(inverse_of(release));
    change.push_back(std::move(release));
  }
  d.decide_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return d;
}

Result<Decision> Engine::decide_availability(const Command& command, std::vector<Mutation>& change,
                                             std::vector<Mutation>& inverse) const {
  auto start = std::chrono::steady_clock::now();
  const NodeAvailabilityChange& asked = command.availability;
  TOPOSCHED_TRY(node, check_node_availability_change(*cluster_, asked));
  Decision d;
  d.kind = command.kind;
  d.availability = asked;
  const NodeMark* before = availability_.mark(node, asked.source);
  if (asked.available) {
    d.changed = before != nullptr;
  } else {
    d.changed = before == nullptr || before->reason != asked.reason;
    d.since_unix_ms = before ? before->since_unix_ms : now_unix_ms();
  }
  if (d.changed) {
    Mutation c = node_mark_change(node, NodeMark{asked.source, asked.reason, d.since_unix_ms}, asked.available);
    inverse.push_back(inverse_of(c));
    change.push_back(std::move(c));
  }
  d.decide_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return d;
}

std::vector<Result<Decision>> Engine::decide(std::span<const Command> commands, const CommitFn& commit) {
  WriterLock lock(mutex_);
  std::vector<Result<Decision>> results;
  results.reserve(commands.size());
  std::vector<Mutation> log;      // the mutations applied, in order: what the commit makes durable
  std::vector<std::size_t> change_index;
  std::vector<Mutation> undo;  // inverses, in the order the changes were applied
  std::vector<Mutation> change, inverse;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    change.clear();
    inverse.clear();
    results.push_back(decide_command(commands[i], change, inverse));
    if (!results.back() || change.empty()) continue;
    if (auto ok = apply_locked(change); !ok) {
      results.back() = tl::unexpected(ok.error());
      continue;
    }
    undo.insert(undo.end(), inverse.begin(), inverse.end());
    log.insert(log.end(), std::make_move_iterator(change.begin()), std::make_move_iterator(change.end()));
    change_index.push_back(i);
  }
  if (log.empty()) return results;
  Result<void> committed = commit ? commit(log) : Result<void>{};
  if (!committed) {
    std::reverse(undo.begin(), undo.end());
    (void)apply_locked(undo);  // the inverse of changes just applied: it fits
    for (std::size_t i : change_index) results[i] = tl::unexpected(committed.error());
  }
  return results;
}

Result<Decision> Engine::decide_one(const Command& command, const CommitFn& commit) {
  return std::move(decide(std::span<const Command>(&command, 1), commit).front());
}

Result<void> Engine::replace(std::span<const Mutation> mutations) {
  // Release every job and lift every mark, then apply the given state, in one all-or-nothing
  // apply under the writer lock: readers see the old or the new state, never a mix.
  WriterLock lock(mutex_);
  std::vector<Mutation> changes;
  for (const std::string& id : state_.job_ids()) changes.push_back(Mutation::release_of(id));
  for (std::uint32_t i = 0; i < cluster_->node_count(); ++i)
    for (const NodeMark& m : availability_.marks(NodeId(i))) changes.push_back(node_mark_change(NodeId(i), m, true));
  changes.insert(changes.end(), mutations.begin(), mutations.end());
  return apply_locked(changes);
}

namespace {
// The unavailable nodes a job holds GPUs on, in rank order of first use: ,"unavailable_nodes":
// [{"node","reason"}], or nothing when there are none (the job's JSON stays as placed).
std::string unavailable_nodes_member(const Cluster& c, const NodeAvailability& availability,
                                     std::span<const GpuId> gpus) {
  if (availability.unavailable_count() == 0) return {};
  OrderedJson nodes = OrderedJson::array();
  std::vector<NodeId> seen;
  for (GpuId g : gpus) {
    NodeId n = c.gpu_node(g);
    if (availability.available(n) || std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    nodes.push_back({{"node", c.node_name(n)}, {"reason", availability.reasons(n)}});
  }
  if (nodes.empty()) return {};
  return ",\"unavailable_nodes\":" + dump_lenient(nodes);
}

// `answer` (a JSON object) with `member` (",\"key\":value") spliced in before its closing brace.
std::string with_member(const std::string& answer, const std::string& member) {
  if (member.empty() || answer.size() < 2 || answer.back() != '}') return answer;
  const bool empty_object = answer == "{}";
  return answer.substr(0, answer.size() - 1) + (empty_object ? member.substr(1) : member) + "}";
}
}  // namespace

std::string Engine::jobs_json() const {
  ReaderLock lock(mutex_);
  std::string out = "{\"jobs\":[";
  bool first = true;
  for (const std::string& id : state_.job_ids()) {
    auto it = answers_.find(id);
    if (it == answers_.end()) continue;
    if (!first) out += ',';
    first = false;
    out += with_member(it->second, unavailable_nodes_member(*cluster_, availability_, state_.job_gpus(id)));
  }
  out += "]}";
  return out;
}

std::optional<std::string> Engine::job_json(std::string_view job_id) const {
  ReaderLock lock(mutex_);
  auto it = answers_.find(std::string(job_id));
  if (it == answers_.end()) return std::nullopt;
  return with_member(it->second, unavailable_nodes_member(*cluster_, availability_, state_.job_gpus(job_id)));
}

namespace {
// One node's JSON (Engine::node_json).
OrderedJson node_to_json(const AllocationState& state, const NodeAvailability& availability, NodeId n) {
  const Cluster& c = state.cluster();
  OrderedJson marks = OrderedJson::array();
  for (const NodeMark& m : availability.marks(n))
    marks.push_back({{"source", m.source}, {"reason", m.reason}, {"since_unix_ms", m.since_unix_ms}});
  std::vector<std::string_view> jobs;
  for (int local = 0; local < c.node_gpu_count(n); ++local) {
    std::string_view owner = state.gpu_owner(c.node_gpu(n, local));
    if (!owner.empty() && std::find(jobs.begin(), jobs.end(), owner) == jobs.end()) jobs.push_back(owner);
  }
  OrderedJson out;
  out["node"] = c.node_name(n);
  out["available"] = availability.available(n);
  out["unavailable"] = std::move(marks);
  out["gpus"] = c.node_gpu_count(n);
  out["free_gpus"] = state.free_gpus(n);
  out["jobs"] = OrderedJson::array();
  for (std::string_view job : jobs) out["jobs"].push_back(std::string(job));
  return out;
}
}  // namespace

std::string Engine::nodes_json() const {
  ReaderLock lock(mutex_);
  OrderedJson nodes = OrderedJson::array();
  for (std::uint32_t i = 0; i < cluster_->node_count(); ++i) nodes.push_back(node_to_json(state_, availability_, NodeId(i)));
  OrderedJson out;
  out["nodes"] = std::move(nodes);
  return dump_lenient(out);
}

std::optional<std::string> Engine::node_json(std::string_view node) const {
  auto n = cluster_->find_node(node);
  if (!n) return std::nullopt;
  ReaderLock lock(mutex_);
  return dump_lenient(node_to_json(state_, availability_, *n));
}

UnavailableSummary Engine::unavailable_summary() const {
  ReaderLock lock(mutex_);
  UnavailableSummary out;
  out.nodes = static_cast<std::int64_t>(availability_.unavailable_count());
  if (out.nodes == 0) return out;
  for (const std::string& id : state_.job_ids()) {
    // A loop, not any_of with a lambda: the analysis sees no lock held inside a lambda.
    for (GpuId g : state_.job_gpus(id)) {
      if (availability_.available(cluster_->gpu_node(g))) continue;
      ++out.jobs_on_them;
      break;
    }
  }
  return out;
}

std::vector<StoredNodeMark> Engine::node_marks(std::string_view source) const {
  ReaderLock lock(mutex_);
  std::vector<StoredNodeMark> out;
  if (availability_.unavailable_count() == 0) return out;
  for (std::uint32_t i = 0; i < cluster_->node_count(); ++i)
    if (const NodeMark* m = availability_.mark(NodeId(i), source)) out.push_back({NodeId(i), *m});
  return out;
}

std::size_t Engine::job_count() const {
  ReaderLock lock(mutex_);
  return state_.job_count();
}

std::int64_t Engine::free_gpus() const {
  ReaderLock lock(mutex_);
  return state_.total_free_gpus();
}

}  // namespace toposched
