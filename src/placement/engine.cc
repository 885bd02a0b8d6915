#include "placement/engine.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "formats/json_input.h"

#include "placement/place_within.h"
#include "topology/hostlist.h"

namespace toposched {

namespace {
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

Result<void> bad(std::string message) { return make_error(ErrorCode::kInvalidArgument, std::move(message)); }

// Reads an integer key; `min` is the smallest accepted value.
Result<void> read_int(const Json& value, std::string_view key, int min, int& out) {
  if (!value.is_number_integer())
    return bad(fmt::format("'{}' must be an integer, found {}", key, quote_json(value)));
  auto v = value.get<std::int64_t>();
  if (v < min || v > 1'000'000'000)
    return bad(fmt::format("'{}' must be {} at least {}, found {}", key, min > 0 ? "a whole number" : "a number", min, v));
  out = static_cast<int>(v);
  return {};
}

Result<void> read_string(const Json& value, std::string_view key, std::string& out) {
  if (!value.is_string()) return bad(fmt::format("'{}' must be a string, found {}", key, quote_json(value)));
  out = value.get<std::string>();
  return {};
}

using KeyReader = Result<void> (*)(const Json& value, PlaceRequest& r);

// One row per accepted key, in the order of the CLI's flags (table style of formats/exporter.cc).
struct KeyRow {
  std::string_view key;
  KeyReader read;
};

const KeyRow kKeys[] = {
    {"job",
     [](const Json& v, PlaceRequest& r) -> Result<void> {
       TOPOSCHED_CHECK(read_string(v, "job", r.job.job_id));
       // Ids travel in URLs (/v1/jobs/{id}) and log lines.
       if (r.job.job_id.size() > 253) return bad("'job' must be at most 253 characters");
       for (char ch : r.job.job_id)
         if (ch == '/' || ch == '?' || ch == '#' || ch == '%' || static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f)
           return bad(fmt::format("'job' may not contain '/', '?', '#', '%', spaces or control characters, found '{}'",
                                  r.job.job_id));
       return {};
     }},
    {"gpus", [](const Json& v, PlaceRequest& r) { return read_int(v, "gpus", 1, r.job.gpus); }},
    {"nodes", [](const Json& v, PlaceRequest& r) { return read_int(v, "nodes", 1, r.job.nodes); }},
    {"gpus_per_node", [](const Json& v, PlaceRequest& r) { return read_int(v, "gpus_per_node", 1, r.job.gpus_per_node); }},
    {"exclusive",
     [](const Json& v, PlaceRequest& r) -> Result<void> {
       if (!v.is_boolean()) return bad(fmt::format("'exclusive' must be true or false, found {}", quote_json(v)));
       r.job.exclusive = v.get<bool>();
       return {};
     }},
    {"tp", [](const Json& v, PlaceRequest& r) { return read_int(v, "tp", 1, r.job.tp); }},
    {"pp", [](const Json& v, PlaceRequest& r) { return read_int(v, "pp", 1, r.job.pp); }},
    {"dp", [](const Json& v, PlaceRequest& r) { return read_int(v, "dp", 1, r.job.dp); }},
    {"ep", [](const Json& v, PlaceRequest& r) { return read_int(v, "ep", 1, r.job.ep); }},
    {"cp", [](const Json& v, PlaceRequest& r) { return read_int(v, "cp", 1, r.job.cp); }},
    {"policy", [](const Json& v, PlaceRequest& r) { return read_string(v, "policy", r.policy); }},
    {"kind",
     [](const Json& v, PlaceRequest& r) -> Result<void> {
       std::string name;
       TOPOSCHED_CHECK(read_string(v, "kind", name));
       auto kind = parse_workload_kind(name);
       if (!kind) return bad(fmt::format("'kind' must be training, inference or inference-pd, not '{}'", name));
       r.job.workload = *kind;
       return {};
     }},
    {"model", [](const Json& v, PlaceRequest& r) { return read_string(v, "model", r.job.model_class); }},
    {"replica_gpus", [](const Json& v, PlaceRequest& r) { return read_int(v, "replica_gpus", 1, r.job.replica_gpus); }},
    {"gpu_model", [](const Json& v, PlaceRequest& r) { return read_string(v, "gpu_model", r.job.gpu_model); }},
    {"required_tier", [](const Json& v, PlaceRequest& r) { return read_string(v, "required_tier", r.job.required_tier); }},
    {"preferred_tier",
     [](const Json& v, PlaceRequest& r) { return read_string(v, "preferred_tier", r.job.preferred_tier); }},
    {"switches", [](const Json& v, PlaceRequest& r) { return read_int(v, "switches", 1, r.job.max_switches); }},
    {"segment", [](const Json& v, PlaceRequest& r) { return read_int(v, "segment", 1, r.job.segment); }},
    {"seed",
     [](const Json& v, PlaceRequest& r) -> Result<void> {
       if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
         return bad(fmt::format("'seed' must be a non-negative integer, found {}", quote_json(v)));
       r.job.seed = v.get<std::uint64_t>();
       return {};
     }},
};

OrderedJson number_or_null(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? OrderedJson(*v) : OrderedJson(nullptr);
}

std::string first_free_job_id(const AllocationState& state) {
  for (int k = 1;; ++k) {
    std::string id = fmt::format("job-{}", k);
    if (!state.has_job(id)) return id;
  }
}

std::string release_json(const Cluster& c, const AllocationState& state, std::string_view job,
                         std::span<const GpuId> gpus) {
  std::vector<std::string> nodes;
  for (GpuId g : gpus) {
    const std::string& n = c.node_name(c.gpu_node(g));
    if (nodes.empty() || nodes.back() != n) nodes.push_back(n);
  }
  OrderedJson out;
  out["job"] = job;
  out["released_gpus"] = gpus.size();
  out["nodes"] = compress_hostlist(nodes);
  out["free_gpus"] = state.total_free_gpus();
  return out.dump();
}
}  // namespace

Result<PlaceRequest> place_request_from_json(const nlohmann::json& body) {
  if (!body.is_object()) return make_error(ErrorCode::kInvalidArgument, fmt::format("expected a JSON object of place options, found {}", body.type_name()));
  PlaceRequest r;
  r.job.dp = 0;
  for (const auto& [key, value] : body.items()) {
    const KeyRow* row = nullptr;
    for (const KeyRow& k : kKeys)
      if (k.key == key) row = &k;
    if (!row) {
      std::string known;
      for (const KeyRow& k : kKeys) known += (known.empty() ? "" : ", ") + std::string(k.key);
      return make_error(ErrorCode::kInvalidArgument, fmt::format("unknown key '{}'; known keys: {}", key, known));
    }
    TOPOSCHED_CHECK(row->read(value, r));
  }
  if ((r.job.gpus > 0) == (r.job.nodes > 0))
    return make_error(ErrorCode::kInvalidArgument, "give exactly one of 'gpus' (a GPU count) or 'nodes' (whole nodes)");
  return r;
}

nlohmann::ordered_json place_request_to_json(const PlaceRequest& request) {
  const JobRequest& j = request.job;
  OrderedJson out;
  out["job"] = j.job_id;
  if (j.gpus > 0) out["gpus"] = j.gpus;
  if (j.nodes > 0) out["nodes"] = j.nodes;
  if (j.gpus_per_node > 0) out["gpus_per_node"] = j.gpus_per_node;
  if (j.exclusive) out["exclusive"] = true;
  out["tp"] = j.tp;
  out["pp"] = j.pp;
  if (j.dp > 0) out["dp"] = j.dp;
  out["ep"] = j.ep;
  out["cp"] = j.cp;
  out["policy"] = request.policy;
  out["kind"] = workload_kind_name(j.workload);
  if (!j.model_class.empty()) out["model"] = j.model_class;
  if (j.replica_gpus > 0) out["replica_gpus"] = j.replica_gpus;
  if (!j.gpu_model.empty()) out["gpu_model"] = j.gpu_model;
  if (!j.required_tier.empty()) out["required_tier"] = j.required_tier;
  if (!j.preferred_tier.empty()) out["preferred_tier"] = j.preferred_tier;
  if (j.max_switches > 0) out["switches"] = j.max_switches;
  if (j.segment > 0) out["segment"] = j.segment;
  if (j.seed != 1) out["seed"] = j.seed;
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
  TOPOSCHED_TRY(policy, find_policy(request.policy));
  JobRequest r = request.job;
  if (r.job_id.empty()) {
    r.job_id = first_free_job_id(state);
  } else if (state.has_job(r.job_id)) {
    return make_error(ErrorCode::kConflict,
                      fmt::format("job '{}' is already placed; release it first or pick another job id", r.job_id));
  }
  TOPOSCHED_TRY(norm, normalize(r, state.cluster()));
  auto p = place_within(state, norm, *policy, request.allowed, detail);
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

Engine::Engine(const Cluster& cluster, AllocationState state) : cluster_(&cluster), state_(std::move(state)) {
  for (const std::string& id : state_.job_ids()) {
    Placement p;
    p.job_id = id;
    auto gpus = state_.job_gpus(id);
    p.gpus_by_rank.assign(gpus.begin(), gpus.end());
    answers_[id] = placement_to_json(*cluster_, p).dump();
  }
}

Result<Decision> Engine::apply(const Command& command) {
  auto start = std::chrono::steady_clock::now();
  Decision d;
  d.kind = command.kind;
  d.dry_run = command.dry_run;
  if (command.kind == Command::Kind::kPlace && !command.hold_gpus.empty()) {
    TOPOSCHED_TRY(p, hold_job(state_, command.place, command.hold_gpus, !command.dry_run));
    d.job_id = p.job_id;
    d.request_json = place_request_to_json(command.place).dump();
    d.answer_json = placement_to_json(*cluster_, p).dump();
    d.gpus_by_rank = std::move(p.gpus_by_rank);
  } else if (command.kind == Command::Kind::kPlace) {
    TOPOSCHED_TRY(p, place_job(state_, command.place, !command.dry_run));
    PlaceRequest normalised = command.place;
    normalised.job.job_id = p.job_id;
    d.job_id = p.job_id;
    d.request_json = place_request_to_json(normalised).dump();
    d.answer_json = placement_to_json(*cluster_, p).dump();
    d.gpus_by_rank = std::move(p.gpus_by_rank);
  } else {
    TOPOSCHED_TRY(gpus, state_.release(command.job_id));
    d.job_id = command.job_id;
    d.answer_json = release_json(*cluster_, state_, d.job_id, gpus);
    d.gpus_by_rank = std::move(gpus);
  }
  d.decide_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return d;
}

void Engine::undo(const Decision& d) {
  if (d.dry_run) return;
  if (d.kind == Command::Kind::kPlace)
    (void)state_.release(d.job_id);
  else
    (void)state_.allocate(d.job_id, d.gpus_by_rank);
}

std::vector<Result<Decision>> Engine::decide(std::span<const Command> commands, const CommitFn& commit) {
  std::unique_lock lock(mutex_);
  std::vector<Result<Decision>> results;
  results.reserve(commands.size());
  std::vector<Decision> changes;
  std::vector<std::size_t> change_index;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    results.push_back(apply(commands[i]));
    if (results.back() && !results.back()->dry_run) {
      changes.push_back(*results.back());
      change_index.push_back(i);
    }
  }
  if (changes.empty()) return results;
  Result<void> committed = commit ? commit(changes) : Result<void>{};
  if (!committed) {
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) undo(*it);
    for (std::size_t i : change_index) results[i] = tl::unexpected(committed.error());
    return results;
  }
  for (const Decision& d : changes) {
    if (d.kind == Command::Kind::kPlace)
      answers_[d.job_id] = d.answer_json;
    else
      answers_.erase(d.job_id);
  }
  return results;
}

Result<Decision> Engine::decide_one(const Command& command, const CommitFn& commit) {
  return std::move(decide(std::span<const Command>(&command, 1), commit).front());
}

Result<void> Engine::restore(std::string_view job_id, std::span<const GpuId> gpus_by_rank, std::string answer_json) {
  std::unique_lock lock(mutex_);
  TOPOSCHED_CHECK(state_.allocate(job_id, gpus_by_rank));
  answers_[std::string(job_id)] = std::move(answer_json);
  return {};
}

Result<void> Engine::replace_jobs(std::span<const StoredJob> jobs) {
  AllocationState fresh(*cluster_);
  std::unordered_map<std::string, std::string> answers;
  for (const StoredJob& job : jobs) {
    TOPOSCHED_CHECK(fresh.allocate(job.id, job.gpus_by_rank));
    answers[job.id] = job.answer_json;
  }
  std::unique_lock lock(mutex_);
  state_ = std::move(fresh);
  answers_ = std::move(answers);
  return {};
}

std::string Engine::jobs_json() const {
  std::shared_lock lock(mutex_);
  std::string out = "{\"jobs\":[";
  bool first = true;
  for (const std::string& id : state_.job_ids()) {
    auto it = answers_.find(id);
    if (it == answers_.end()) continue;
    if (!first) out += ',';
    first = false;
    out += it->second;
  }
  out += "]}";
  return out;
}

std::optional<std::string> Engine::job_json(std::string_view job_id) const {
  std::shared_lock lock(mutex_);
  auto it = answers_.find(std::string(job_id));
  if (it == answers_.end()) return std::nullopt;
  return it->second;
}

std::size_t Engine::job_count() const {
  std::shared_lock lock(mutex_);
  return state_.job_count();
}

std::int64_t Engine::free_gpus() const {
  std::shared_lock lock(mutex_);
  return state_.total_free_gpus();
}

}  // namespace toposched
