#include "k8s/gang_planner.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "k8s/pod_request.h"

namespace toposched::k8s {

Clock steady_clock_ms() {
  return [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
}

std::string job_id_for(const Pod& pod, const std::optional<GangInfo>& gang) {
  const std::string& ns = pod.namespace_name.empty() ? std::string("default") : pod.namespace_name;
  return gang ? fmt::format("k8s:{}:{}", ns, gang->name) : fmt::format("k8s:{}:pod:{}", ns, pod.name);
}

namespace {

// The planner's key for a pod: its uid, or namespace/name when it has none.
std::string key_of(const std::string& uid, const std::string& ns, const std::string& name) {
  return uid.empty() ? fmt::format("{}/{}", ns, name) : uid;
}

std::string binding_pod_key(const ExtenderBindingArgs& pod) {
  return key_of(pod.pod_uid, pod.pod_namespace, pod.pod_name);
}

}  // namespace

std::string pod_key(const Pod& pod) { return key_of(pod.uid, pod.namespace_name, pod.name); }

namespace {

std::string join_ints(const std::vector<int>& v) {
  return fmt::format("{}", fmt::join(v, ","));
}

}  // namespace

// The nodes kube-scheduler offered, resolved against the cluster model once per call.
struct GangPlanner::Offer {
  bool by_name = true;  // nodeCacheCapable: answer NodeNames; else Nodes
  std::vector<std::string_view> names;
  std::vector<const Node*> objects;         // Nodes mode
  std::vector<std::optional<NodeId>> ids;   // per offered node
  NodeMask mask;                            // per cluster node: offered

  static Result<Offer> from(const ExtenderArgs& args, const Cluster& c) {
    Offer o;
    if (args.node_names) {
      o.names.reserve(args.node_names->size());
      for (const auto& n : *args.node_names) o.names.push_back(n);
    } else if (args.nodes) {
      o.by_name = false;
      for (const Node& n : args.nodes->items) {
        o.names.push_back(n.name);
        o.objects.push_back(&n);
      }
    } else {
      return make_error(ErrorCode::kInvalidArgument, "toposched: the request has neither NodeNames nor Nodes");
    }
    o.mask.assign(c.node_count(), 0);
    o.ids.reserve(o.names.size());
    for (std::string_view name : o.names) {
      auto id = c.find_node(name);
      if (id) o.mask[id->index()] = 1;
      o.ids.push_back(id);
    }
    return o;
  }

  // The one planned node (offered at `index`) and nothing else: kube-scheduler drops the
  // nodes an answer leaves out, and with a node found no one reads the others' reasons, so
  // a 5,000-node answer stays small.
  ExtenderFilterResult only(std::size_t index) const {
    ExtenderFilterResult r;
    if (by_name) r.node_names = std::vector<std::string>{std::string(names[index])};
    else r.nodes = NodeList{{*objects[index]}};
    return r;
  }

  // Every offered node (keep_all: pods toposched has no opinion on), or none with `reason`
  // for each (unknown nodes: unresolvable), so kube-scheduler's "0/N nodes are available"
  // says why.
  ExtenderFilterResult answer(bool keep_all, const std::string& reason) const {
    ExtenderFilterResult r;
    std::vector<std::string> kept_names;
    NodeList kept_nodes;
    FailedNodesMap failed, unresolvable;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (keep_all) {
        if (by_name) kept_names.emplace_back(names[i]);
        else kept_nodes.items.push_back(*objects[i]);
      } else if (!ids[i]) {
        unresolvable.emplace(std::string(names[i]), "toposched: node is not in the cluster model");
      } else {
        failed.emplace(std::string(names[i]), reason);
      }
    }
    if (by_name && !kept_names.empty()) r.node_names = std::move(kept_names);
    if (!by_name && !kept_nodes.items.empty()) r.nodes = std::move(kept_nodes);
    if (!failed.empty()) r.failed_nodes = std::move(failed);
    if (!unresolvable.empty()) r.failed_and_unresolvable_nodes = std::move(unresolvable);
    return r;
  }
};

GangPlanner::GangPlanner(GpuLedger& ledger, Clock clock, PlannerOptions options)
    : ledger_(ledger), clock_(std::move(clock)), options_(std::move(options)) {}

std::vector<std::string> GangPlanner::expire() {
  MutexLock lock(mu_);
  return expire_locked(clock_());
}

std::vector<std::string> GangPlanner::expire_locked(std::int64_t now) {
  std::vector<std::string> released;
  for (auto it = groups_.begin(); it != groups_.end();) {
    Group& g = it->second;
    if (g.bound_count() > 0 || now < g.deadline_ms) {
      ++it;
      continue;
    }
    (void)ledger_.release(g.job_id);  // kNotFound: released through the API already
    for (const Member& m : g.members) slot_of_pod_.erase(m.pod_key);
    released.push_back(g.job_id);
    it = groups_.erase(it);
  }
  std::erase_if(pending_, [now](const auto& entry) { return now >= entry.second.deadline_ms; });
  return released;
}

void GangPlanner::note_nomination(const std::string& job_id, const std::string& key, const Pod& pod) {
  if (pod.nominated_node_name.empty()) return;
  auto node = ledger_.cluster().find_node(pod.nominated_node_name);
  if (!node) return;
  PendingGroup& p = pending_[job_id];
  p.nominated[key] = *node;
  p.deadline_ms = clock_() + options_.reservation_timeout_ms;
}

std::set<NodeId> GangPlanner::sibling_nodes(const std::string& job_id, const std::string& key) const {
  std::set<NodeId> nodes;
  if (auto it = pending_.find(job_id); it != pending_.end())
    for (const auto& [sibling, node] : it->second.nominated)
      if (sibling != key) nodes.insert(node);
  return nodes;
}

NodeMask GangPlanner::offer_with_siblings(const std::string& job_id, const std::string& key, NodeMask offered) const {
  for (NodeId node : sibling_nodes(job_id, key)) offered[node.index()] = 1;
  return offered;
}

void GangPlanner::forget(std::string_view job_id) {
  MutexLock lock(mu_);
  auto it = groups_.find(std::string(job_id));
  if (it == groups_.end()) return;
  for (const Member& m : it->second.members) slot_of_pod_.erase(m.pod_key);
  groups_.erase(it);
}

ExtenderFilterResult GangPlanner::filter(const ExtenderArgs& args) {
  MutexLock lock(mu_);
  expire_locked(clock_());
  return filter_locked(args);
}

Result<GangPlanner::Group*> GangPlanner::plan_group(const Pod& pod, const std::string& job_id, int size, int gpus,
                                                    const NodeMask& usable) {
  const Cluster& c = ledger_.cluster();
  Group g;
  g.job_id = job_id;
  g.size = size;
  g.gpus_per_pod = gpus;
  g.deadline_ms = clock_() + options_.reservation_timeout_ms;
  std::vector<GpuId> gpus_by_rank;
  bool restored = false;
  TOPOSCHED_TRY(request, job_request_for(pod, c, job_id, size, gpus));
  TOPOSCHED_CHECK(normalize(request, c));  // reject a bad plan before touching the ledger
  auto placed = ledger_.reserve(request, pod_policy(pod, options_.policy), usable);
  if (placed) {
    gpus_by_rank = std::move(placed->gpus_by_rank);
  } else if (placed.error().code == ErrorCode::kConflict) {
    // The ledger already holds this job (restored by the service after a restart): rebuild
    // the plan from its GPUs and never expire it.
    AllocationState snap = ledger_.snapshot();
    auto held = snap.job_gpus(job_id);
    gpus_by_rank.assign(held.begin(), held.end());
    restored = true;
  } else {
    return tl::unexpected(placed.error());
  }
  // Member k is pod k of the request (gpus_per_pod): ranks [k*gpus, (k+1)*gpus), on one
  // node; several members may share a node.
  for (std::size_t rank = 0; rank < gpus_by_rank.size(); ++rank) {
    const NodeId n = c.gpu_node(gpus_by_rank[rank]);
    if (rank % static_cast<std::size_t>(gpus) == 0) g.members.push_back(Member{n, {}, {}, {}, {}, restored});
    Member& m = g.members.back();
    m.gpus.push_back(c.gpu_local_index(gpus_by_rank[rank]));
    m.ranks.push_back(static_cast<int>(rank));
  }
  auto [it, inserted] = groups_.insert_or_assign(job_id, std::move(g));
  return &it->second;
}

int GangPlanner::take_slot(Group& g, const Pod& pod, const std::string& key, const NodeMask& offered) {
  if (auto it = slot_of_pod_.find(key); it != slot_of_pod_.end() && it->second.first == g.job_id)
    return it->second.second;
  const int size = static_cast<int>(g.members.size());
  auto free_at = [&](int i, bool need_offered) {
    return g.members[i].pod_key.empty() && (!need_offered || offered[g.members[i].node.index()]);
  };
  int slot = -1;
  if (auto r = pod_rank(pod); r && *r < size && free_at(*r, true)) slot = *r;
  for (int i = 0; slot < 0 && i < size; ++i)
    if (free_at(i, true)) slot = i;
  for (int i = 0; slot < 0 && i < size; ++i)
    if (free_at(i, false)) slot = i;
  if (slot < 0) return -1;
  g.members[slot].pod_key = key;
  g.members[slot].pod_name = fmt::format("{}/{}", pod.namespace_name, pod.name);
  slot_of_pod_[key] = {g.job_id, slot};
  return slot;
}

ExtenderFilterResult GangPlanner::filter_locked(const ExtenderArgs& args) {
  ExtenderFilterResult error_result;
  if (!args.pod) {
    error_result.error = "toposched: the request has no Pod";
    return error_result;
  }
  const Pod& pod = *args.pod;
  const Cluster& c = ledger_.cluster();
  auto offer = Offer::from(args, c);
  if (!offer) {
    error_result.error = offer.error().message;
    return error_result;
  }
  auto gpus = pod_gpu_count(pod);
  if (!gpus) {
    error_result.error = "toposched: " + gpus.error().message;
    return error_result;
  }
  if (*gpus == 0) return offer->answer(true, {});
  auto gang = pod_gang(pod);
  if (!gang) {
    error_result.error = "toposched: " + gang.error().message;
    return error_result;
  }
  const std::string job_id = job_id_for(pod, *gang);
  const std::string key = pod_key(pod);
  const int size = *gang ? (*gang)->size : 1;
  Group* g = nullptr;
  if (auto it = groups_.find(job_id); it != groups_.end() && !ledger_.holds(job_id)) {
    // Released through the service API (DELETE /v1/jobs/{id}): plan afresh.
    for (const Member& m : it->second.members) slot_of_pod_.erase(m.pod_key);
    groups_.erase(it);
  }
  if (auto it = groups_.find(job_id); it != groups_.end()) {
    g = &it->second;
  } else {
    note_nomination(job_id, key, pod);
    auto planned = plan_group(pod, job_id, size, *gpus, offer_with_siblings(job_id, key, offer->mask));
    if (!planned) {
      if (planned.error().code == ErrorCode::kInvalidArgument) {
        error_result.error = fmt::format("toposched: pod {}/{}: {}", pod.namespace_name, pod.name,
                                         planned.error().message);
        return error_result;
      }
      return offer->answer(false,
                           fmt::format("toposched: group {} ({} pods x {} GPUs) cannot be placed whole: {}", job_id,
                                       size, *gpus, planned.error().message));
    }
    g = *planned;
    pending_.erase(job_id);
  }
  if (g->gpus_per_pod != *gpus)
    return offer->answer(false,
                         fmt::format("toposched: pod asks for {} GPUs but group {} was planned with {} per pod", *gpus,
                                     job_id, g->gpus_per_pod));
  const int slot = take_slot(*g, pod, key, offer->mask);
  if (slot < 0)
    return offer->answer(false,
                         fmt::format("toposched: group {} already has its {} members", job_id, g->size));
  const NodeId planned_node = g->members[slot].node;
  const std::string& node_name = c.node_name(planned_node);
  for (std::size_t i = 0; i < offer->ids.size(); ++i) {
    if (offer->ids[i] == planned_node) return offer->only(i);
  }
  return offer->answer(false,
                       fmt::format("toposched: {} rank {} is planned on {}, which kube-scheduler did not offer", job_id,
                                   slot, node_name));
}

HostPriorityList GangPlanner::prioritize(const ExtenderArgs& args) {
  MutexLock lock(mu_);
  std::vector<HostPriority> out;
  std::optional<NodeId> planned;
  if (args.pod) {
    if (auto it = slot_of_pod_.find(pod_key(*args.pod)); it != slot_of_pod_.end()) {
      auto g = groups_.find(it->second.first);
      if (g != groups_.end()) planned = g->second.members[it->second.second].node;
    }
  }
  const Cluster& c = ledger_.cluster();
  auto score = [&](std::string_view name) -> std::int64_t {
    if (!planned) return 0;
    auto id = c.find_node(name);
    return id && *id == *planned ? 10 : 0;
  };
  if (args.node_names) {
    for (const auto& n : *args.node_names) out.push_back({n, score(n)});
  } else if (args.nodes) {
    for (const Node& n : args.nodes->items) out.push_back({n.name, score(n.name)});
  }
  if (out.empty()) return std::nullopt;
  return out;
}

Result<BindingPlan> GangPlanner::prepare_bind(const ExtenderBindingArgs& args) {
  MutexLock lock(mu_);
  expire_locked(clock_());
  BindingPlan plan{args.pod_name, args.pod_namespace, args.pod_uid, args.node, {}, {}};
  auto it = slot_of_pod_.find(binding_pod_key(args));
  if (it == slot_of_pod_.end()) return plan;  // not a pod toposched placed (no GPUs): a plain Binding
  const Group& g = groups_.at(it->second.first);
  const Member& m = g.members[it->second.second];
  const std::string& planned = ledger_.cluster().node_name(m.node);
  if (planned != args.node)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("toposched: pod {}/{} is planned on {}, not {}", args.pod_namespace, args.pod_name,
                                  planned, args.node));
  plan.job_id = g.job_id;
  plan.annotations["toposched.io/gpus"] = join_ints(m.gpus);
  plan.annotations["toposched.io/ranks"] = join_ints(m.ranks);
  plan.annotations["toposched.io/rank"] = std::to_string(it->second.second);
  plan.annotations["toposched.io/job"] = g.job_id;
  return plan;
}

Result<std::string> GangPlanner::dry_run(const ExtenderArgs& args) const {
  if (!args.pod) return make_error(ErrorCode::kInvalidArgument, "toposched: the request has no Pod");
  const Pod& pod = *args.pod;
  const Cluster& c = ledger_.cluster();
  TOPOSCHED_TRY(offer, Offer::from(args, c));
  TOPOSCHED_TRY(gpus, pod_gpu_count(pod));
  if (gpus == 0)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("pod {}/{} asks for no GPUs: nothing to place", pod.namespace_name, pod.name));
  TOPOSCHED_TRY(gang, pod_gang(pod));
  const int size = gang ? gang->size : 1;
  TOPOSCHED_TRY(request, job_request_for(pod, c, job_id_for(pod, gang), size, gpus));
  return ledger_.dry_run(request, pod_policy(pod, options_.policy), offer.mask);
}

Result<MemberStatus> GangPlanner::member_of(const ExtenderBindingArgs& pod) {
  MutexLock lock(mu_);
  expire_locked(clock_());
  auto it = slot_of_pod_.find(binding_pod_key(pod));
  if (it == slot_of_pod_.end())
    return make_error(ErrorCode::kNotFound, fmt::format("toposched holds no slot for pod {}/{}", pod.pod_namespace,
                                                        pod.pod_name));
  const Group& g = groups_.at(it->second.first);
  const Member& m = g.members[it->second.second];
  return MemberStatus{g.job_id, g.size, g.bound_count(), it->second.second, ledger_.cluster().node_name(m.node),
                      m.gpus};
}

std::string GangPlanner::unreserve(const ExtenderBindingArgs& pod) {
  MutexLock lock(mu_);
  auto it = slot_of_pod_.find(binding_pod_key(pod));
  if (it == slot_of_pod_.end()) return {};
  auto g = groups_.find(it->second.first);
  if (g == groups_.end()) return {};
  Group& group = g->second;
  if (group.bound_count() > 0) {
    group.members[it->second.second].pod_key.clear();
    group.members[it->second.second].pod_name.clear();
    slot_of_pod_.erase(it);
    return {};
  }
  std::string job = group.job_id;
  (void)ledger_.release(job);  // kNotFound: released through the API already
  for (const Member& m : group.members) slot_of_pod_.erase(m.pod_key);
  groups_.erase(g);
  return job;
}

void GangPlanner::finish_bind(const BindingPlan& plan, bool posted) {
  if (!posted || plan.job_id.empty()) return;
  MutexLock lock(mu_);
  auto it = slot_of_pod_.find(key_of(plan.pod_uid, plan.pod_namespace, plan.pod_name));
  if (it == slot_of_pod_.end()) return;
  auto g = groups_.find(it->second.first);
  if (g != groups_.end()) g->second.members[it->second.second].bound = true;
}

std::vector<GroupView> GangPlanner::groups() const {
  MutexLock lock(mu_);
  std::vector<GroupView> out;
  for (const auto& [id, g] : groups_) {
    GroupView v{id, g.size, g.gpus_per_pod, g.deadline_ms, {}};
    for (const Member& m : g.members)
      v.members.push_back({ledger_.cluster().node_name(m.node), m.gpus, m.ranks, m.pod_name, m.bound});
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace toposched::k8s
