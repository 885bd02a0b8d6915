// Export writers: helpers (hashing, names, regexes, block sizes, label levels) and
// property tests over every preset and random clusters: the text each writer produces has
// the cluster's structure, read back both by a small independent parser here and by the
// discovery readers (topology.conf, Kubernetes node labels, the native spec).
// GCC 12 at -O1 with sanitizers reports a false -Wmaybe-uninitialized inside <regex>'s
// std::function members (GCC bug 105562); std::regex is only the test's oracle here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/discovery.h"
#include "formats/export_common.h"
#include "formats/exporter.h"
#include "formats/gres_conf.h"
#include "formats/k8s_labels.h"
#include "formats/k8s_nodes.h"
#include "formats/slurm_topology.h"
#include "formats/native_spec.h"
#include "formats/nfd.h"
#include "formats/slurm_tree.h"
#include "formats/topograph_blocks.h"
#include "topology/hostlist.h"
#include "topology/presets.h"
#include "topology/yaml_document.h"

namespace toposched {
namespace {

Cluster built_or_throw(Result<Cluster> c) {
  if (!c) throw std::runtime_error(c.error().to_string());
  return std::move(*c);
}

Cluster preset(const std::string& spec) { return built_or_throw(build_preset(spec)); }

// An all-to-all NVLink matrix, or PCIe (SYS) between every pair when links is 0.
std::vector<GpuLink> gpu_matrix(int gpus, int links) {
  auto m = NodeType::full_nvlink_mesh(gpus, links);
  if (links == 0)
    for (int a = 0; a < gpus; ++a)
      for (int b = 0; b < gpus; ++b)
        if (a != b) m[static_cast<std::size_t>(a * gpus + b)] = GpuLink{LinkClass::kSys, 0};
  return m;
}

// Every preset, at sizes a test can afford.
std::vector<std::string> small_presets() {
  return {"dgx-a100?nodes=60&su_size=20", "dgx-h100?nodes=64",        "hgx-h200?nodes=20&su_size=8",
          "gb200-nvl72?racks=8",          "gb200-nvl72?racks=5&racks_per_su=2", "pcie-l40s",
          "llama3-24k?pods=2&racks=6",    "synthetic?nodes=100&fanout=8,4"};
}

TEST(ExportPresetList, CoversEveryPreset) {
  std::set<std::string> covered;
  for (const auto& s : small_presets()) covered.insert(s.substr(0, s.find('?')));
  for (const auto& info : preset_catalog()) EXPECT_TRUE(covered.contains(info.name)) << info.name;
}

// A random cluster: 0-3 tiers, switches with odd names (spaces, slashes, 70+ characters),
// nodes on leaf switches or on none, empty switches, domains with and without sub-domains.
Cluster random_cluster(unsigned seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  ClusterBuilder b(fmt::format("random-{}", seed));
  NodeType t;
  t.name = "t";
  t.gpu_model = "H100";
  t.gpu_count = pick(1, 8);
  t.gpu_links = gpu_matrix(t.gpu_count, pick(0, 1) * 18);
  t.nvlink_GBps_per_link = 25;
  t.pcie_GBps = 64;
  NodeTypeId type = b.add_node_type(t);
  int nodes = pick(1, 60);
  std::vector<NodeId> ids;
  for (int i = 0; i < nodes; ++i) ids.push_back(b.add_node(fmt::format("n{:03}", i), type));
  int tiers = pick(0, 3);
  std::vector<std::vector<SwitchId>> by_tier(static_cast<std::size_t>(tiers));
  static const std::string kOdd[] = {"", " x", "/a#b", "[1]"};
  for (int tier = 0; tier < tiers; ++tier) {
    b.add_tier(Tier{fmt::format("tier{}", tier), 0, 0.5, 1.0});
    int count = tier == tiers - 1 ? pick(1, 2) : pick(1, 6);
    for (int s = 0; s < count; ++s) {
      std::string odd = pick(0, 4) == 0 ? kOdd[pick(1, 3)] : "";
      if (pick(0, 9) == 0) odd = std::string(70, 'L');
      by_tier[static_cast<std::size_t>(tier)].push_back(b.add_switch(fmt::format("sw{}-{}{}", tier, s, odd), tier));
    }
  }
  for (int tier = 0; tier + 1 < tiers; ++tier)
    for (SwitchId s : by_tier[static_cast<std::size_t>(tier)]) {
      const auto& up = by_tier[static_cast<std::size_t>(tier + 1)];
      b.connect(s, up[static_cast<std::size_t>(pick(0, static_cast<int>(up.size()) - 1))]);
    }
  if (tiers > 0)
    for (NodeId n : ids) {
      if (pick(0, 9) == 0) continue;  // a node under no switch
      const auto& leaves = by_tier[0];
      b.attach(n, leaves[static_cast<std::size_t>(pick(0, static_cast<int>(leaves.size()) - 1))]);
    }
  int domains = pick(0, 3);
  int next = 0;
  for (int d = 0; d < domains && next < nodes; ++d) {
    DomainId dom = b.add_domain(DomainSpec{fmt::format("nvl {}", d), 100, 0});
    int size = pick(1, std::max(1, nodes / 3));
    for (int i = 0; i < size && next < nodes; ++i, ++next)
      b.add_to_domain(ids[static_cast<std::size_t>(next)], dom, pick(0, 1) ? fmt::format("sub{}", i % 2) : "");
  }
  return built_or_throw(std::move(b).build());
}

std::vector<std::pair<std::string, Cluster>> all_clusters() {
  std::vector<std::pair<std::string, Cluster>> out;
  for (const auto& s : small_presets()) out.emplace_back("preset:" + s, preset(s));
  for (unsigned seed = 1; seed <= 40; ++seed) out.emplace_back(fmt::format("random seed {}", seed), random_cluster(seed));
  return out;
}

std::map<std::string, std::string> key_values(const std::string& line) {
  std::map<std::string, std::string> kv;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return kv;
}

std::vector<std::string> expand(const std::string& expr) {
  if (expr.empty()) return {};
  auto r = expand_hostlist(expr);
  EXPECT_TRUE(r.has_value()) << expr;
  return r ? *r : std::vector<std::string>{};
}

// Checks that `model -> text` names pair up one to one.
class Bijection {
 public:
  void pair(const std::string& model, const std::string& text) {
    auto [a, fa] = forward_.emplace(model, text);
    EXPECT_EQ(a->second, text) << model << " written as two names";
    auto [b, fb] = backward_.emplace(text, model);
    EXPECT_EQ(b->second, model) << text << " stands for two switches";
  }

 private:
  std::map<std::string, std::string> forward_, backward_;
};

// The switches above a node in the model, closest first (names).
std::vector<std::string> model_chain(const Cluster& c, NodeId n) {
  std::vector<std::string> chain;
  for (SwitchId s = c.node_switch(n); s.valid(); s = c.switch_parent(s)) chain.push_back(c.switch_name(s));
  return chain;
}

TEST(ExportRoundTrip, SlurmTreeHasTheClusterStructure) {
  for (const auto& [what, c] : all_clusters()) {
    SCOPED_TRACE(what);
    auto out = export_cluster(c, "slurm-tree", {});
    if (slurm_tree(c).switches.empty()) {
      ASSERT_FALSE(out.has_value());
      EXPECT_EQ(out.error().code, ErrorCode::kValidation);
      continue;
    }
    ASSERT_TRUE(out.has_value()) << out.error().to_string();
    // Read back: switch -> parent, node -> leaf.
    std::map<std::string, std::string> parent, leaf_of;
    std::set<std::string> names;
    std::istringstream in(out->text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      auto kv = key_values(line);
      ASSERT_TRUE(kv.contains("SwitchName")) << line;
      const std::string& name = kv["SwitchName"];
      EXPECT_TRUE(is_valid_slurm_name(name)) << name;
      EXPECT_TRUE(names.insert(name).second) << "switch written twice: " << name;
      EXPECT_FALSE(kv.contains("Switches") && kv.contains("Nodes")) << line;
      EXPECT_TRUE(kv.contains("Switches") || kv.contains("Nodes")) << line;
      for (const auto& k : expand(kv["Switches"])) parent[k] = name;
      for (const auto& n : expand(kv["Nodes"])) EXPECT_TRUE(leaf_of.emplace(n, name).second) << n << " under two switches";
    }
    Bijection names_match;
    for (std::uint32_t i = 0; i < c.node_count(); ++i) {
      NodeId n(i);
      std::vector<std::string> want = model_chain(c, n);
      std::vector<std::string> got;
      auto it = leaf_of.find(c.node_name(n));
      for (std::string s = it == leaf_of.end() ? "" : it->second; !s.empty(); s = parent.contains(s) ? parent[s] : "")
        got.push_back(s);
      ASSERT_EQ(got.size(), want.size()) << c.node_name(n);
      for (std::size_t k = 0; k < got.size(); ++k) names_match.pair(want[k], got[k]);
    }
    // Switches with no node below them are left out, all others are written.
    std::size_t non_empty = 0;
    for (std::uint32_t s = 0; s < c.switch_count(); ++s) non_empty += !c.switch_subtree_nodes(SwitchId(s)).empty();
    EXPECT_EQ(names.size(), non_empty);
  }
}

TEST(ExportRoundTrip, K8sLabelsHaveTheClusterStructure) {
  for (const auto& [what, c] : all_clusters()) {
    SCOPED_TRACE(what);
    ExportOptions o;
    o.label_style = LabelStyle::kPatch;
    auto out = export_cluster(c, "k8s-labels", o);
    ASSERT_TRUE(out.has_value());
    auto doc = nlohmann::json::parse(out->text);
    ASSERT_EQ(doc.size(), c.node_count());
    std::vector<Bijection> tiers(c.tiers().size());
    Bijection domains;
    for (std::uint32_t i = 0; i < c.node_count(); ++i) {
      NodeId n(i);
      const auto& labels = doc.at(c.node_name(n)).at("metadata").at("labels");
      std::size_t fabric = 0;
      for (auto it = labels.begin(); it != labels.end(); ++it) {
        EXPECT_TRUE(is_valid_k8s_label_value(it.value().get<std::string>())) << it.key() << "=" << it.value();
        fabric += it.key().starts_with(kFabricTierLabelPrefix);
      }
      EXPECT_EQ(fabric, model_chain(c, n).size());
      for (SwitchId s = c.node_switch(n); s.valid(); s = c.switch_parent(s))
        tiers[static_cast<std::size_t>(c.switch_tier(s))].pair(c.switch_name(s), labels.at(fabric_tier_label(c.switch_tier(s))));
      if (DomainId d = c.node_domain(n); d.valid()) {
        domains.pair(c.domain(d).name, labels.at(std::string(kAcceleratorDomainLabel)));
        EXPECT_EQ(labels.contains(std::string(kAcceleratorSubDomainLabel)), !c.node_sub_domain(n).empty());
      } else {
        EXPECT_FALSE(labels.contains(std::string(kAcceleratorDomainLabel)));
      }
    }
  }
}

// The NFD objects hold the k8s-labels export's values: each node with a topology label has one
// NodeFeature whose topograph.network elements are its labels (fabric-tier-N for tier N,
// accelerator-domain, accelerator-sub-domain), and each (kind, value) one NodeFeatureGroup
// matching it; object names are unique, at most 63 characters.
TEST(ExportRoundTrip, NfdHoldsTheLabelsOfEveryNode) {
  for (const auto& [what, c] : all_clusters()) {
    SCOPED_TRACE(what);
    ExportOptions o;
    o.label_style = LabelStyle::kPatch;
    auto labels = export_cluster(c, "k8s-labels", o);
    auto nfd = export_cluster(c, "nfd", {});
    ASSERT_TRUE(labels && nfd) << (nfd ? "" : nfd.error().to_string());
    const auto by_node = nlohmann::json::parse(labels->text);
    std::map<std::string, std::map<std::string, std::string>> want;  // node -> kind -> value
    std::set<std::pair<std::string, std::string>> want_groups;
    for (auto it = by_node.begin(); it != by_node.end(); ++it)
      for (const auto& [key, value] : it.value().at("metadata").at("labels").items()) {
        std::string kind = key == kAcceleratorDomainLabel      ? "accelerator-domain"
                           : key == kAcceleratorSubDomainLabel ? "accelerator-sub-domain"
                           : key.starts_with(kFabricTierLabelPrefix)
                               ? "fabric-tier-" + key.substr(kFabricTierLabelPrefix.size())
                               : "";
        if (kind.empty()) continue;
        want[it.key()][kind] = value.get<std::string>();
        want_groups.emplace(kind, value.get<std::string>());
      }
    std::map<std::string, std::map<std::string, std::string>> got;
    std::set<std::pair<std::string, std::string>> got_groups;
    std::set<std::string> names;
    for (const YAML::Node& doc : YAML::LoadAll(nfd->text)) {
      const std::string name = doc["metadata"]["name"].as<std::string>();
      EXPECT_LE(name.size(), 63u) << name;
      EXPECT_TRUE(names.insert(doc["kind"].as<std::string>() + "/" + name).second) << name;
      EXPECT_EQ(doc["metadata"]["namespace"].as<std::string>(), kNfdDefaultNamespace);
      if (doc["kind"].as<std::string>() == "NodeFeature") {
        const std::string node = doc["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"].as<std::string>();
        const YAML::Node attributes = doc["spec"]["features"]["attributes"];
        EXPECT_EQ(attributes["system.name"]["elements"]["nodename"].as<std::string>(), node);
        EXPECT_EQ(name, nfd_object_name("topograph-node", node));
        for (const auto& e : attributes["topograph.network"]["elements"])
          got[node][e.first.as<std::string>()] = e.second.as<std::string>();
      } else {
        ASSERT_EQ(doc["kind"].as<std::string>(), "NodeFeatureGroup");
        const YAML::Node rule = doc["spec"]["featureGroupRules"][0];
        const YAML::Node expression = rule["matchFeatures"][0]["matchExpressions"];
        ASSERT_EQ(expression.size(), 1u);
        const std::string kind = expression.begin()->first.as<std::string>();
        const std::string value = expression.begin()->second["value"][0].as<std::string>();
        EXPECT_EQ(expression.begin()->second["op"].as<std::string>(), "In");
        EXPECT_EQ(doc["metadata"]["labels"]["topograph.run/group-type"].as<std::string>(), kind);
        EXPECT_EQ(name, nfd_object_name("topograph-" + kind, value));
        got_groups.emplace(kind, value);
      }
    }
    EXPECT_EQ(got, want);
    EXPECT_EQ(got_groups, want_groups);
  }
}

// The switches above a node as a discovery reader saw them, closest first.
std::vector<std::string> discovered_chain(const DiscoveredTopology& t, const std::string& node) {
  std::map<std::string, std::string> parent;
  for (const auto& s : t.switches) parent[s.name] = s.parent;
  std::vector<std::string> chain;
  for (const auto& n : t.nodes)
    if (n.name == node)
      for (std::string s = n.switch_name; !s.empty(); s = parent[s]) chain.push_back(s);
  return chain;
}

// Every node's switch chain and domain, as the reader saw them, matches the model one to one
// (names may differ where the writer had to make them valid for the target).
void expect_discovered_structure(const Cluster& c, const DiscoveredTopology& t, bool with_domains) {
  std::map<std::string, const DiscoveredNode*> by_name;
  for (const auto& n : t.nodes) by_name[n.name] = &n;
  std::map<std::string, int> tier_of;
  for (const auto& s : t.switches) tier_of[s.name] = s.tier;
  Bijection switches, domains, subs;
  for (std::uint32_t i = 0; i < c.node_count(); ++i) {
    NodeId n(i);
    std::vector<std::string> want = model_chain(c, n);
    std::vector<std::string> got = discovered_chain(t, c.node_name(n));
    ASSERT_EQ(got.size(), want.size()) << c.node_name(n);
    for (std::size_t k = 0; k < got.size(); ++k) switches.pair(want[k], got[k]);
    if (!with_domains) continue;
    DomainId d = c.node_domain(n);
    auto it = by_name.find(c.node_name(n));
    std::string got_domain = it == by_name.end() ? "" : it->second->domain;
    EXPECT_EQ(d.valid(), !got_domain.empty()) << c.node_name(n);
    if (d.valid()) domains.pair(c.domain(d).name, got_domain);
  }
}

TEST(ExportRoundTrip, SlurmTreeReadBackByTheDiscoveryReader) {
  for (const auto& [what, c] : all_clusters()) {
    SCOPED_TRACE(what);
    auto out = export_cluster(c, "slurm-tree", {});
    if (slurm_tree(c).switches.empty()) {
      EXPECT_FALSE(out.has_value());
      continue;
    }
    ASSERT_TRUE(out.has_value());
    auto t = read_slurm_topology(out->text, "exported.conf");
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    expect_discovered_structure(c, *t, false);
    // Tiers by height: for trees whose leaves all sit in tier 0 they are the model's tiers.
    for (std::uint32_t s = 0; s < c.switch_count(); ++s) {
      SwitchId id(s);
      if (c.switch_subtree_nodes(id).empty()) continue;
      auto chain = discovered_chain(*t, c.node_name(c.switch_subtree_nodes(id).front()));
      int depth = 0;
      for (SwitchId k = c.node_switch(c.switch_subtree_nodes(id).front()); k != id; k = c.switch_parent(k)) ++depth;
      ASSERT_LT(static_cast<std::size_t>(depth), chain.size());
      for (const auto& d : t->switches) {
        if (d.name == chain[static_cast<std::size_t>(depth)]) {
          EXPECT_EQ(d.tier, c.switch_tier(id)) << d.name;
        }
      }
    }
    bool all_attached = c.switch_count() > 0;
    for (std::uint32_t n = 0; n < c.node_count(); ++n) all_attached = all_attached && c.node_switch(NodeId(n)).valid();
    if (all_attached) {
      // Through the whole discovery merge, into a Cluster again.
      auto back = merge_discovered({*t}, DiscoveryOptions{});
      ASSERT_TRUE(back.has_value()) << back.error().to_string();
      EXPECT_EQ(back->cluster.node_count(), c.node_count());
      EXPECT_EQ(back->cluster.tiers().size(), c.tiers().size());
      for (std::uint32_t n = 0; n < c.node_count(); ++n) {
        auto m = back->cluster.find_node(c.node_name(NodeId(n)));
        ASSERT_TRUE(m.has_value());
        EXPECT_EQ(model_chain(back->cluster, *m).size(), model_chain(c, NodeId(n)).size());
      }
    }
  }
}

TEST(ExportRoundTrip, SlurmBlockReadBackByTheDiscoveryReader) {
  for (const auto& [what, c] : all_clusters()) {
    SCOPED_TRACE(what);
    if (c.domain_count() == 0 || TopographBlockLayout(c).empty()) continue;
    auto out = export_cluster(c, "slurm-block", {});
    ASSERT_TRUE(out.has_value()) << out.error().to_string();
    auto t = read_slurm_topology(out->text, "blocks.conf");
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    // Each block holds nodes of one accelerator domain (a domain may give several blocks:
    // one per sub-domain), and no node is in two blocks.
    std::map<std::string, std::string> domain_of_block;
    std::set<std::string> seen;
    for (const auto& n : t->nodes) {
      if (n.domain.empty()) continue;
      EXPECT_TRUE(seen.insert(n.name).second) << n.name;
      auto id = c.find_node(n.name);
      ASSERT_TRUE(id.has_value()) << n.name;
      DomainId d = c.node_domain(*id);
      ASSERT_TRUE(d.valid()) << n.name;
      auto [it, fresh] = domain_of_block.emplace(n.domain, c.domain(d).name);
      EXPECT_EQ(it->second, c.domain(d).name) << n.name;
    }
    EXPECT_FALSE(seen.empty());
  }
}

TEST(ExportRoundTrip, K8sLabelsReadBackByTheDiscoveryReader) {
  for (const auto& [what, c] : all_clusters()) {
    SCOPED_TRACE(what);
    ExportOptions o;
    o.label_style = LabelStyle::kPatch;
    auto out = export_cluster(c, "k8s-labels", o);
    ASSERT_TRUE(out.has_value());
    // Apply each merge patch to an empty Node: what `kubectl get nodes -o json` then shows.
    auto patches = nlohmann::json::parse(out->text);
    nlohmann::json list = {{"apiVersion", "v1"}, {"kind", "NodeList"}, {"items", nlohmann::json::array()}};
    for (auto it = patches.begin(); it != patches.end(); ++it) {
      nlohmann::json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", it.key()}}}};
      node.merge_patch(it.value());
      list["items"].push_back(node);
    }
    auto t = read_k8s_nodes(list.dump(), "nodes.json");
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    expect_discovered_structure(c, *t, true);
  }
}

void expect_same_structure(const Cluster& a, const Cluster& b) {
  ASSERT_EQ(a.node_count(), b.node_count());
  ASSERT_EQ(a.switch_count(), b.switch_count());
  ASSERT_EQ(a.domain_count(), b.domain_count());
  ASSERT_EQ(a.tiers().size(), b.tiers().size());
  for (std::uint32_t i = 0; i < a.node_count(); ++i) {
    NodeId n(i);
    auto m = b.find_node(a.node_name(n));
    ASSERT_TRUE(m.has_value()) << a.node_name(n);
    EXPECT_EQ(model_chain(a, n), model_chain(b, *m));
    EXPECT_EQ(a.node_type(n), b.node_type(*m));
    EXPECT_EQ(a.node_domain(n).valid() ? a.domain(a.node_domain(n)).name : "", b.node_domain(*m).valid() ? b.domain(b.node_domain(*m)).name : "");
    EXPECT_EQ(a.node_sub_domain(n), b.node_sub_domain(*m));
  }
  for (std::uint32_t s = 0; s < a.switch_count(); ++s) {
    auto t = b.find_switch(a.switch_name(SwitchId(s)));
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(a.switch_tier(SwitchId(s)), b.switch_tier(*t));
  }
}

TEST(ExportRoundTrip, NativeJsonAndYamlReadBackIntoTheSameCluster) {
  for (const auto& [what, c] : all_clusters()) {
    SCOPED_TRACE(what);
    for (const char* fmt : {"json", "yaml"}) {
      auto out = export_cluster(c, fmt, {});
      ASSERT_TRUE(out.has_value());
      auto back = read_native_spec(out->text, "exported");
      ASSERT_TRUE(back.has_value()) << back.error().to_string();
      expect_same_structure(c, *back);
    }
  }
}

TEST(ExportAllFormats, NeverFailOnValidClusters) {
  for (const auto& [what, c] : all_clusters()) {
    SCOPED_TRACE(what);
    for (const auto& f : export_formats().rows()) {
      auto out = f.value(c, {});
      bool blockless = (f.name == "slurm-block") && TopographBlockLayout(c).empty();
      bool treeless = (f.name == "slurm-tree") && slurm_tree(c).switches.empty();
      if (blockless || treeless) {
        EXPECT_FALSE(out.has_value()) << f.name;
        continue;
      }
      ASSERT_TRUE(out.has_value()) << f.name << ": " << out.error().to_string();
      EXPECT_FALSE(out->text.empty()) << f.name;
    }
  }
  EXPECT_FALSE(export_cluster(preset("pcie-l40s"), "slurm-tre", {}).has_value());
}

TEST(ExportCommon, Fnv1aMatchesTheReferenceVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

// Topograph's stableObjectName (pkg/engines/nfd/objects.go); the expected names were computed
// with Python's hashlib from that function's rule, not by this code.
TEST(ExportNfd, ObjectNamesFollowTopograph) {
  EXPECT_EQ(nfd_object_name("topograph-node", "node-a"), "topograph-node-node-a-66570ff0");
  EXPECT_EQ(nfd_object_name("topograph-fabric-tier-0", "leaf-12"), "topograph-fabric-tier-0-leaf-12-e4a19be5");
  EXPECT_EQ(nfd_object_name("topograph-accelerator-sub-domain", "nvl3.rack01"),
            "topograph-accelerator-sub-domain-nvl3-rack01-52ae9bdb");
  EXPECT_EQ(nfd_object_name("topograph-node", "A_B..C"), "topograph-node-a-b-c-255df101");
  EXPECT_EQ(nfd_object_name("topograph-fabric-tier-1",
                            "ocid1.computenetworkblock.oc1.us-chicago-1.anxxeljrejz3ltt4aw7bfkthkbhmcc6dr2tszvkaqpwe6kklnbgvur"
                            "tbpgkq"),
            "topograph-fabric-tier-1-ocid1-computenetworkblock-oc1-3b73e9c6");
  EXPECT_EQ(nfd_object_name("topograph-node", "___"), "topograph-node-value-bda25155");
}

TEST(ExportNfd, NamespaceAndLongNodeNames) {
  ExportOptions o;
  o.nfd_namespace = "nfd";
  auto out = export_cluster(preset("dgx-h100?nodes=2"), "nfd", o);
  ASSERT_TRUE(out) << out.error().to_string();
  for (const YAML::Node& doc : YAML::LoadAll(out->text)) EXPECT_EQ(doc["metadata"]["namespace"].as<std::string>(), "nfd");
  o.k8s_node_names = {{"dgx-h100-001", std::string(64, 'n')}};
  auto long_name = export_cluster(preset("dgx-h100?nodes=2"), "nfd", o);
  ASSERT_FALSE(long_name);
  EXPECT_NE(long_name.error().message.find("cannot be the label value nfd.node.kubernetes.io/node-name"),
            std::string::npos);
}

TEST(ExportCommon, LabelValuesFollowTopograph) {
  EXPECT_EQ(k8s_label_value("leaf-su001"), "leaf-su001");
  EXPECT_EQ(k8s_label_value(" leaf 1/a_"), "leaf-1-a");
  std::string long_value(64, 'a');
  EXPECT_EQ(k8s_label_value(long_value), fmt::format("x{:x}", fnv1a64(long_value)));
  EXPECT_EQ(k8s_label_value(std::string(63, 'a')), std::string(63, 'a'));
  EXPECT_EQ(k8s_label_value("##"), fmt::format("x{:x}", fnv1a64("##")));
  for (const std::string& v : std::vector<std::string>{"a", "A.b_c-1", "", std::string(63, 'z')}) EXPECT_TRUE(is_valid_k8s_label_value(v)) << v;
  for (const std::string& v : std::vector<std::string>{"-a", "a-", "a b", std::string(64, 'z'), "a/b"}) EXPECT_FALSE(is_valid_k8s_label_value(v)) << v;
  EXPECT_EQ(k8s_object_name("My Cluster_1"), "my-cluster-1");
}

TEST(ExportCommon, SlurmNamesAreValidAndUnique) {
  NameMap names(NameMap::Target::kSlurm);
  EXPECT_EQ(names("leaf-su001"), "leaf-su001");
  std::string a = names("a b"), b = names("a#b"), c = names(std::string(100, 'x')), d = names(std::string(101, 'x'));
  std::set<std::string> all{a, b, c, d, "leaf-su001"};
  EXPECT_EQ(all.size(), 5u);
  for (const auto& n : all) EXPECT_TRUE(is_valid_slurm_name(n)) << n;
  EXPECT_EQ(names("a b"), a);  // stable
  EXPECT_EQ(names.renamed().size(), 4u);
}

TEST(ExportCommon, HostlistRegexMatchesExactlyTheNames) {
  std::mt19937 rng(7);
  for (int round = 0; round < 60; ++round) {
    int width = std::uniform_int_distribution<int>(1, 4)(rng);
    int lo = std::uniform_int_distribution<int>(0, 120)(rng), hi = lo + std::uniform_int_distribution<int>(0, 150)(rng);
    std::set<int> chosen;
    for (int v = lo; v <= hi; ++v)
      if (std::uniform_int_distribution<int>(0, 5)(rng)) chosen.insert(v);
    if (chosen.empty()) chosen.insert(lo);
    std::vector<std::string> names;
    for (int v : chosen) names.push_back(fmt::format("rack{}-n{:0{}}", v % 3, v, width));
    std::sort(names.begin(), names.end());
    std::string pattern = hostlist_regex(names);
    std::regex re(pattern);
    std::set<std::string> wanted(names.begin(), names.end());
    for (int v = 0; v <= 400; ++v)
      for (int w = 1; w <= 5; ++w)
        for (int r = 0; r < 3; ++r) {
          std::string candidate = fmt::format("rack{}-n{:0{}}", r, v, w);
          EXPECT_EQ(std::regex_match(candidate, re), wanted.contains(candidate)) << candidate << " vs " << pattern;
        }
  }
  EXPECT_EQ(hostlist_regex({"dgx001", "dgx002", "dgx003"}), "^dgx00[1-3]$");
}

TEST(ExportCommon, BlockSizesAreComputedAsTopographDoesAndValidated) {
  TopographBlockLayout layout(preset("gb200-nvl72?racks=8"));
  EXPECT_TRUE(layout.from_domains());
  auto sizes = [](const TopographBlockLayout& l, std::vector<long> requested) { return l.cluster_blocks(requested, {})->sizes; };
  EXPECT_EQ(layout.cluster_blocks({}, {})->blocks.size(), 8u);
  EXPECT_EQ(sizes(layout, {}), (std::vector<long>{18, 36, 72, 144}));
  EXPECT_EQ(sizes(TopographBlockLayout(preset("gb200-nvl72?racks=5")), {}), (std::vector<long>{18, 36, 72}));
  EXPECT_EQ(sizes(TopographBlockLayout(preset("gb200-nvl72?racks=1")), {}), (std::vector<long>{18}));
  EXPECT_EQ(sizes(layout, {9, 18, 72}), (std::vector<long>{9, 18, 72}));
  // Topograph accepts a first size above the smallest block and a last one beyond the blocks.
  EXPECT_EQ(sizes(layout, {18, 288}), (std::vector<long>{18, 288}));
  for (std::vector<long> bad : std::vector<std::vector<long>>{{18, 27}, {18, 18}, {36, 18}, {0}, {-4}, {65537}, std::vector<long>(21, 1)}) {
    auto r = validate_block_sizes(bad);
    EXPECT_FALSE(r.has_value()) << fmt::format("{}", fmt::join(bad, ","));
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    }
    EXPECT_FALSE(layout.cluster_blocks(bad, {}).has_value());
  }
  // Without domains: one block per leaf switch.
  TopographBlockLayout leaves(preset("dgx-h100?nodes=100"));
  EXPECT_FALSE(leaves.from_domains());
  auto blocks = leaves.cluster_blocks({}, {});
  ASSERT_TRUE(blocks.has_value());
  ASSERT_EQ(blocks->blocks.size(), 4u);
  EXPECT_EQ(blocks->blocks.back().nodes.size(), 4u);
  EXPECT_EQ(blocks->sizes, (std::vector<long>{4, 8, 16}));
}

TEST(ExportCommon, LabelLevelsPlaceDomainsUnderTheTierThatHoldsThem) {
  auto gb = label_levels(preset("gb200-nvl72?racks=4&racks_per_su=2"));
  EXPECT_EQ(gb.labels, (std::vector<std::string>{"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0",
                                                 "accelerator.topograph.run/domain", "kubernetes.io/hostname"}));
  auto dgx = label_levels(preset("dgx-h100?nodes=64"));
  EXPECT_EQ(dgx.labels, (std::vector<std::string>{"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0", "kubernetes.io/hostname"}));
  EXPECT_TRUE(dgx.dropped.empty());
}

TEST(ExportSlurmTree, SplitsSwitchesWithNodesAndChildren) {
  ClusterBuilder b("mixed");
  NodeType t;
  t.name = "t";
  t.gpu_count = 1;
  t.gpu_links = gpu_matrix(1, 0);
  t.pcie_GBps = 64;
  auto type = b.add_node_type(t);
  auto n1 = b.add_node("n1", type), n2 = b.add_node("n2", type);
  b.add_tier(Tier{"leaf"});
  b.add_tier(Tier{"spine"});
  auto n3 = b.add_node("n3", type);
  auto leaf = b.add_switch("leaf", 0), top = b.add_switch("top", 1);
  auto clash = b.add_switch("top-nodes", 0);  // the name the split-off leaf would get
  b.add_switch("empty", 0);
  b.connect(leaf, top);
  b.connect(clash, top);
  b.attach(n1, leaf);
  b.attach(n2, top);
  b.attach(n3, clash);
  auto c = std::move(b).build();
  ASSERT_TRUE(c.has_value()) << c.error().to_string();
  SlurmTree tree = slurm_tree(*c);
  ASSERT_EQ(tree.switches.size(), 4u);  // leaf, top-nodes, a new leaf for n2, top; "empty" is left out
  const SlurmSwitch& root = tree.switches.back();
  EXPECT_EQ(root.name, "top");
  EXPECT_EQ(root.level, 1);
  EXPECT_TRUE(root.nodes.empty());
  ASSERT_EQ(root.switches.size(), 3u);
  std::set<std::string> names;
  for (const auto& s : tree.switches) names.insert(s.name);
  EXPECT_EQ(names.size(), 4u);
  EXPECT_TRUE(names.contains("top-nodes"));
  for (const auto& s : tree.switches)
    if (s.nodes == std::vector<std::string>{"n2"}) {
      EXPECT_NE(s.name, "top-nodes");
      EXPECT_TRUE(s.name.starts_with("top-nodes-")) << s.name;
    }
  EXPECT_EQ(tree.warnings.size(), 2u);
}

TEST(ExportGres, LinksAndCoresAsNvmlAutodetectWritesThem) {
  NodeType t;
  t.name = "x";
  t.gpu_model = "NVIDIA H100 80GB HBM3";
  t.gpu_count = 4;
  t.nvlink_GBps_per_link = 25;
  t.pcie_GBps = 64;
  t.gpu_links = gpu_matrix(4, 0);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      if (a != b) t.gpu_links[static_cast<std::size_t>(a * 4 + b)] = (a / 2 == b / 2) ? GpuLink{LinkClass::kNVLink, 4} : GpuLink{LinkClass::kSys, 0};
  t.gpu_cpu_affinity = {"0-3,8-11", "0-3,8-11", "4-7,12-15", "4-7,12-15"};
  EXPECT_EQ(gres_cores(t), (std::vector<std::string>{"0-3", "0-3", "4-7", "4-7"}));
  EXPECT_EQ(gres_type_name(t, {}), "nvidia_h100_80gb_hbm3");
  t.gpu_cpu_affinity = {"0-3", "0-3", "4-7", "4-7"};  // no hyperthread siblings listed
  EXPECT_EQ(gres_cores(t), (std::vector<std::string>{"0-3", "0-3", "4-7", "4-7"}));
  t.gpu_cpu_affinity = {"0-1,6", "2-3", "x", ""};  // asymmetric, malformed, unknown
  EXPECT_EQ(gres_cores(t), (std::vector<std::string>{"0-1,6", "2-3", "", ""}));

  ClusterBuilder b("pairs");
  auto type = b.add_node_type(t);
  b.add_node("g1", type);
  b.add_node("g2", type);
  auto c = std::move(b).build();
  ASSERT_TRUE(c.has_value()) << c.error().to_string();
  auto out = export_cluster(*c, "gres", {});
  ASSERT_TRUE(out.has_value());
  EXPECT_NE(out->text.find("NodeName=g[1-2] Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia2 Links=0,0,-1,4\n"), std::string::npos)
      << out->text;
}

}  // namespace
}  // namespace toposched
