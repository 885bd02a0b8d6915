// kueue-bestfit against Kueue's own TAS unit tests, Kueue commit
// ff69552e79ad21652c36caa97038382e55625cf7 (v0.20.0-devel), default feature gates.
//
// tests/data/kueue/find_topology_assignments.json holds every table case of
// TestFindTopologyAssignments (pkg/cache/scheduler/tas_cache_test.go), transcribed by
// scripts/port-kueue-tas-cases; the cases toposched cannot express are listed there under
// "not_expressible" with the reason (and in docs/placement.md). schedule_for_tas.json holds
// the cases of TestScheduleForTAS (pkg/scheduler/scheduler_tas_test.go) whose outcome is one
// topology assignment, transcribed by hand (admitted workloads become their pods).
//
// Cases that turn the TASBalancedPlacement gate on run with kueue-balanced (Kueue's defaults plus
// that gate), the others with kueue-bestfit. Multi-layer slices (TASMultiLayerTopology,
// podsetSliceRequiredTopologyConstraints) become --slice-size/--slice-tier for the first layer
// and JobRequest::inner_slices for the others.
//
// Translation: one pod = one GPU. Kueue's levels become fabric tiers (top first) and the
// lowest level the node; a node's GPU count is how many pods of the request fit on it when
// empty (Kueue's CountIn over the requested resources and the pod count), and the GPUs that
// the pods already running there take are allocated to another job in the state. With a
// lowest level other than the hostname, each lowest-level domain becomes one node. Nodes
// outside the flavor's node labels or without every level label are left out, as Kueue does.
#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "placement/placement.h"

namespace toposched {
namespace {

using Quantities = std::vector<std::pair<std::string, long long>>;
using Labels = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kHostname = "kubernetes.io/hostname";

struct KNode {
  std::string name;
  Labels labels;
  Quantities allocatable;  // cpu in millicores, memory in bytes, pods
};

struct KPod {  // a pod already on a node (Kueue: non-TAS usage)
  std::string node;  // empty = not scheduled
  Quantities requests;
  bool terminal = false;
};

struct KTopo {  // kueue.PodSetTopologyRequest; present = false is a nil request (implied)
  std::string required, preferred;
  bool unconstrained = false;
  std::string slice_topology;
  int slice_size = 0;
  std::vector<std::pair<std::string, int>> inner_layers;  // multi-layer slices below the first
  bool present = false;
};

struct KDomain {
  int count;
  std::vector<std::string> values;
};

struct KPodSet {
  std::string name;
  Quantities requests;
  int count;
  KTopo topo;
  std::vector<std::string> want_levels;
  std::vector<KDomain> want;  // empty = Kueue refuses
  std::string want_reason;
};

struct KCase {
  std::string name;
  std::vector<std::string> levels;
  Labels flavor_node_labels;
  std::vector<KNode> nodes;
  std::vector<KPod> pods;
  std::vector<KPodSet> podsets;
  std::string source = "TestFindTopologyAssignments";
  bool balanced = false;  // feature gate TASBalancedPlacement on: run with kueue-balanced
};

// ---------------------------------------------------------------------------------------------
// Reading the transcribed cases.

using Json = nlohmann::json;

template <typename T>
std::vector<std::pair<std::string, T>> pairs(const Json& object) {
  std::vector<std::pair<std::string, T>> out;
  for (auto it = object.begin(); it != object.end(); ++it) out.emplace_back(it.key(), it.value().get<T>());
  return out;
}

KTopo topology_request_of(const Json& j) {
  KTopo t;
  if (j.is_null()) return t;
  t.present = true;
  t.required = j.value("required", "");
  t.preferred = j.value("preferred", "");
  t.unconstrained = j.value("unconstrained", false);
  t.slice_topology = j.value("slice_topology", "");
  t.slice_size = j.value("slice_size", 0);
  if (j.contains("slice_layers")) {  // TASMultiLayerTopology: the first layer is the slice
    const Json& layers = j.at("slice_layers");
    for (std::size_t i = 0; i < layers.size(); ++i) {
      std::string topo = layers[i].at("topology").get<std::string>();
      int size = layers[i].at("size").get<int>();
      if (i == 0) {
        t.slice_topology = topo;
        t.slice_size = size;
      } else {
        t.inner_layers.emplace_back(topo, size);
      }
    }
  }
  return t;
}

KCase case_of(const Json& j, const std::string& source) {
  KCase c;
  c.name = j.at("name").get<std::string>();
  c.source = source;
  c.levels = j.at("levels").get<std::vector<std::string>>();
  c.flavor_node_labels = pairs<std::string>(j.at("flavor_node_labels"));
  if (j.contains("feature_gates")) c.balanced = j.at("feature_gates").value("TASBalancedPlacement", false);
  for (const Json& n : j.at("nodes"))
    c.nodes.push_back({n.at("name").get<std::string>(), pairs<std::string>(n.at("labels")),
                       pairs<long long>(n.at("allocatable"))});
  for (const Json& p : j.at("pods"))
    c.pods.push_back({p.at("node").get<std::string>(), pairs<long long>(p.at("requests")), p.at("terminal").get<bool>()});
  for (const Json& p : j.at("podsets")) {
    KPodSet ps{p.at("name").get<std::string>(), pairs<long long>(p.at("requests")), p.at("count").get<int>(),
               topology_request_of(p.at("topology_request")), {}, {}, p.at("want_reason").get<std::string>()};
    if (!p.at("want").is_null()) {
      ps.want_levels = p.at("want").at("levels").get<std::vector<std::string>>();
      for (const Json& d : p.at("want").at("domains"))
        ps.want.push_back({d.at("count").get<int>(), d.at("values").get<std::vector<std::string>>()});
    }
    c.podsets.push_back(std::move(ps));
  }
  return c;
}

Json read_json(const std::string& name) {
  std::ifstream in(std::string(TOPOSCHED_TEST_DATA) + "/kueue/" + name);
  EXPECT_TRUE(in) << "cannot open tests/data/kueue/" << name;
  return in ? Json::parse(in) : Json::object({{"cases", Json::array()}});
}

std::vector<KCase> cases_in(const std::string& file, const std::string& source) {
  Json doc = read_json(file);
  EXPECT_EQ(doc.value("commit", ""), "ff69552e79ad21652c36caa97038382e55625cf7") << file;
  std::vector<KCase> out;
  for (const Json& c : doc.at("cases")) out.push_back(case_of(c, source));
  return out;
}

std::vector<KCase> find_topology_assignments_cases() {
  return cases_in("find_topology_assignments.json", "TestFindTopologyAssignments");
}

std::vector<KCase> schedule_for_tas_cases() { return cases_in("schedule_for_tas.json", "TestScheduleForTAS"); }

// ---------------------------------------------------------------------------------------------
// Translation of a case into a cluster, a state and requests.

std::string label_of(const KNode& n, const std::string& key) {
  for (const auto& [k, v] : n.labels)
    if (k == key) return v;
  return {};
}

// Kueue's Requests.CountIn with the implicit "pods: 1".
long long pods_that_fit(const std::map<std::string, long long>& free, const Quantities& requests) {
  long long fit = free.count("pods") ? free.at("pods") : 0;
  for (const auto& [res, req] : requests) {
    if (req <= 0) continue;
    long long have = free.count(res) ? free.at(res) : 0;
    fit = std::min(fit, std::max(0LL, have) / req);
  }
  return std::max(0LL, fit);
}

struct Leaf {
  std::vector<std::string> values;  // level values, top first
  std::map<std::string, long long> allocatable, used;
};

struct Built {
  std::optional<Cluster> cluster;
  std::vector<GpuId> busy;  // GPUs the pods already running take
};

std::string join(const std::vector<std::string>& values, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? "-" : "") + values[i];
  return out;
}

// The cluster for `c`, its nodes added in `order` (a permutation of the eligible nodes).
Built build_cluster(const KCase& c, const Quantities& requests, unsigned shuffle_seed) {
  const bool hostname_leaf = c.levels.back() == kHostname;
  std::vector<Leaf> leaves;
  std::map<std::string, std::size_t> leaf_by_host;
  for (const KNode& n : c.nodes) {
    bool in_flavor = true;
    for (const auto& [k, v] : c.flavor_node_labels) in_flavor = in_flavor && label_of(n, k) == v;
    std::vector<std::string> values;
    for (const std::string& level : c.levels) values.push_back(label_of(n, level));
    if (!in_flavor || std::count(values.begin(), values.end(), std::string()) > 0) continue;
    auto [it, fresh] = leaf_by_host.emplace(join(values, values.size()), leaves.size());
    if (fresh) leaves.push_back(Leaf{values, {}, {}});
    for (const auto& [res, q] : n.allocatable) leaves[it->second].allocatable[res] += q;
    for (const KPod& p : c.pods) {
      if (p.node != n.name || p.terminal) continue;
      for (const auto& [res, q] : p.requests) leaves[it->second].used[res] += q;
      leaves[it->second].used["pods"] += 1;
    }
  }
  std::mt19937 rng(shuffle_seed);
  if (shuffle_seed != 0) std::shuffle(leaves.begin(), leaves.end(), rng);

  ClusterBuilder b("kueue-case");
  const std::size_t switch_levels = c.levels.size() - 1;
  for (std::size_t t = 0; t < switch_levels; ++t) b.add_tier(Tier{c.levels[switch_levels - 1 - t], 0, 0.5, 1.0});
  std::map<int, NodeTypeId> types;
  Built out;
  std::vector<std::pair<NodeId, int>> used_gpus;
  for (const Leaf& leaf : leaves) {
    std::map<std::string, long long> free = leaf.allocatable;
    for (const auto& [res, q] : leaf.used) free[res] -= q;
    const int empty_fit = static_cast<int>(pods_that_fit(leaf.allocatable, requests));
    const int now_fit = static_cast<int>(std::min<long long>(pods_that_fit(free, requests), empty_fit));
    const int gpus = std::max(empty_fit, 1);  // a node that holds no pod: one GPU, taken
    if (!types.count(gpus)) {
      NodeType t;
      t.name = fmt::format("pods-{}", gpus);
      t.gpu_model = "GPU";
      t.gpu_count = gpus;
      t.gpu_links = NodeType::full_nvlink_mesh(gpus, 18);
      t.nvlink_GBps_per_link = 25;
      t.nvswitch = true;
      t.pcie_GBps = 63;
      types[gpus] = b.add_node_type(t);
    }
    // Switch names are the level values joined, so names under one parent order as Kueue's do.
    SwitchId parent;
    for (std::size_t l = 0; l < switch_levels; ++l) {
      std::string name = join(leaf.values, l + 1);
      auto sw = b.find_switch(name);
      if (!sw) {
        sw = b.add_switch(name, static_cast<int>(switch_levels - 1 - l));
        if (parent.valid()) b.connect(*sw, parent);
      }
      parent = *sw;
    }
    std::string name = hostname_leaf ? leaf.values.back() : join(leaf.values, leaf.values.size());
    NodeId node = b.add_node(name, types[gpus]);
    if (parent.valid()) b.attach(node, parent);
    used_gpus.emplace_back(node, gpus - now_fit);
  }
  auto built = std::move(b).build();
  EXPECT_TRUE(built) << c.name << ": " << built.error().message;
  if (!built) return out;
  out.cluster = std::move(*built);
  for (auto [node, k] : used_gpus)
    for (int l = 0; l < k; ++l) out.busy.push_back(out.cluster->node_gpu(node, l));
  return out;
}

// A Kueue level label as a toposched tier name: the lowest level is the node.
std::string tier_of(const KCase& c, const std::string& level) {
  return level == c.levels.back() ? "node" : level;
}

JobRequest request_of(const KCase& c, const KPodSet& ps) {
  JobRequest r;
  r.job_id = ps.name;
  r.gpus = ps.count;
  if (!ps.topo.required.empty()) r.required_tier = tier_of(c, ps.topo.required);
  if (!ps.topo.preferred.empty()) r.preferred_tier = tier_of(c, ps.topo.preferred);
  r.unconstrained = ps.topo.unconstrained;
  // Kueue ignores a slice size without a slice topology (getSliceSizeWithSinglePodAsDefault).
  if (!ps.topo.slice_topology.empty()) {
    r.slice_tier = tier_of(c, ps.topo.slice_topology);
    r.slice_size = ps.topo.slice_size;
  }
  for (const auto& [topo, size] : ps.topo.inner_layers) r.inner_slices.push_back({tier_of(c, topo), size, {}});
  return r;
}

// "allows to fit only 3 out of 4 pod(s)" or "doesn't allow to fit any of 4 pod(s)" in
// Kueue's reason, or the multi-layer form's counts ("1/2 slice(s) fit on level" for each
// layer, level names left out: toposched names tiers); empty when it says something else.
std::string fit_phrase(const std::string& reason) {
  if (reason.find("slice(s) fit on level") != std::string::npos) {
    std::string out;
    for (std::size_t at = reason.find("; "); at != std::string::npos; at = reason.find("; ", at + 2)) {
      auto end = reason.find(" slice(s) fit on level", at);
      if (end == std::string::npos) break;
      out += (out.empty() ? "" : ", ") + reason.substr(at + 2, end - at - 2);
    }
    return out;
  }
  for (const char* key : {"allows to fit only", "doesn't allow to fit any of"}) {
    auto at = reason.find(key);
    if (at == std::string::npos) continue;
    auto end = reason.find(')', at);
    return reason.substr(at, end == std::string::npos ? std::string::npos : end + 1 - at);
  }
  return {};
}

// Runs every PodSet of the case in order (each later one sees the earlier ones' GPUs taken,
// as Kueue's assumed usage) and compares with Kueue's answers.
void run_case(const KCase& c, unsigned shuffle_seed) {
  SCOPED_TRACE(fmt::format("Kueue {} case \"{}\" (node order seed {})", c.source, c.name, shuffle_seed));
  ASSERT_FALSE(c.podsets.empty());
  Built b = build_cluster(c, c.podsets.front().requests, shuffle_seed);
  ASSERT_TRUE(b.cluster);
  const Cluster& cluster = *b.cluster;
  AllocationState state(cluster);
  if (!b.busy.empty()) {
    ASSERT_TRUE(state.allocate("running-pods", b.busy));
  }
  const PlacementPolicy& policy = **find_policy(c.balanced ? "kueue-balanced" : "kueue-bestfit");
  for (const KPodSet& ps : c.podsets) {
    SCOPED_TRACE("PodSet " + ps.name);
    auto norm = normalize(request_of(c, ps), cluster);
    Result<Placement> p = norm ? place(state, *norm, policy) : tl::unexpected(norm.error());
    if (ps.want.empty()) {
      EXPECT_FALSE(p) << "Kueue refuses (" << ps.want_reason << "); toposched placed it on "
                      << (p ? p->nodes_hostlist : "");
      std::string phrase = fit_phrase(ps.want_reason);
      if (!phrase.empty() && norm) {
        auto direct = policy.select(state, *norm, {});
        ASSERT_FALSE(direct);
        EXPECT_EQ(fit_phrase(direct.error().message).find(phrase), 0u)
            << "Kueue: " << ps.want_reason << "\ntoposched: " << direct.error().message;
      }
      continue;
    }
    ASSERT_TRUE(p) << p.error().message;
    std::vector<std::pair<std::string, int>> got;
    for (GpuId g : p->gpus_by_rank) {
      const std::string& node = cluster.node_name(cluster.gpu_node(g));
      if (got.empty() || got.back().first != node) got.emplace_back(node, 0);
      ++got.back().second;
    }
    std::vector<std::pair<std::string, int>> want;
    for (const KDomain& d : ps.want) want.emplace_back(join(d.values, d.values.size()), d.count);
    EXPECT_EQ(got, want);
    ASSERT_TRUE(state.allocate(ps.name, p->gpus_by_rank));
  }
}

TEST(KueueFindTopologyAssignments, EveryExpressibleCaseGivesKueuesAssignment) {
  std::vector<KCase> cases = find_topology_assignments_cases();
  EXPECT_EQ(cases.size(), 82u);  // and 58 listed as not expressible, with the reason
  for (const KCase& c : cases) run_case(c, 0);
}

TEST(KueueScheduleForTAS, EveryExpressibleCaseGivesKueuesAssignment) {
  std::vector<KCase> cases = schedule_for_tas_cases();
  EXPECT_EQ(cases.size(), 18u);
  for (const KCase& c : cases) run_case(c, 0);
}

// Every case of TestFindTopologyAssignments is either ported or listed with a reason.
TEST(KueueFindTopologyAssignments, EveryCaseIsPortedOrExplained) {
  Json doc = read_json("find_topology_assignments.json");
  EXPECT_EQ(doc.at("cases").size() + doc.at("not_expressible").size(), 140u);
  for (const Json& skipped : doc.at("not_expressible"))
    EXPECT_FALSE(skipped.at("reason").get<std::string>().empty()) << skipped.at("name");
}

// Kueue breaks ties by domain name, so the answer may not depend on the order the nodes are
// listed in: every case again with the nodes (and so the switches) added in shuffled orders.
TEST(KueueFindTopologyAssignments, AnswerDoesNotDependOnNodeOrder) {
  std::vector<KCase> cases = find_topology_assignments_cases();
  for (const KCase& c : schedule_for_tas_cases()) cases.push_back(c);
  for (const KCase& c : cases)
    for (unsigned seed : {1u, 2u, 3u, 4u, 5u}) run_case(c, seed);
}

}  // namespace
}  // namespace toposched
