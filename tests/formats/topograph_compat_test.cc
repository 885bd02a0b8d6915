// Topograph compatibility: Topograph's own test models read as shipped, and Topograph's
// export tests (NVIDIA/topograph at e2b625071e327ee5c3bb119d8a31289a818c30fc, 2026-08-21,
// Apache-2.0) ported as a table: each case names the Topograph test it comes from, gives
// its cluster as a Topograph model (the Go test's graph written as tests/models YAML), its
// engine parameters, and Topograph's expected text, compared as Slurm reads it: the same
// switches (children, nodes), the same blocks in the same order with the same node sets
// and names, the same BlockSizes; for topology.yaml the same topologies in order.
// Cases toposched cannot express are listed in docs/export.md with the reason.
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "formats/cluster_source.h"
#include "formats/exporter.h"
#include "formats/topograph_blocks.h"
#include "formats/topograph_export.h"
#include "topology/hostlist.h"


namespace toposched {
namespace {

std::set<std::string> expand(const std::string& hostlist) {
  auto names = expand_hostlist(hostlist);
  if (!names) throw std::runtime_error("bad hostlist in test: " + hostlist);
  return {names->begin(), names->end()};
}

// What Slurm takes from a topology.conf: switches by name (lines for one switch merge) and
// blocks in order.
struct ConfView {
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> switches;
  std::vector<std::pair<std::string, std::set<std::string>>> blocks;
  std::string block_sizes;
  bool operator==(const ConfView&) const = default;
};

ConfView read_conf(const std::string& text) {
  ConfView v;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::map<std::string, std::string> kv;
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      auto eq = w.find('=');
      kv[w.substr(0, eq)] = eq == std::string::npos ? "" : w.substr(eq + 1);
    }
    if (kv.contains("SwitchName")) {
      auto& sw = v.switches[kv["SwitchName"]];
      if (kv.contains("Switches")) for (const auto& s : expand(kv["Switches"])) sw.first.insert(s);
      if (kv.contains("Nodes")) for (const auto& n : expand(kv["Nodes"])) sw.second.insert(n);
    } else if (kv.contains("BlockName")) {
      v.blocks.emplace_back(kv["BlockName"], kv.contains("Nodes") ? expand(kv["Nodes"]) : std::set<std::string>{});
    } else if (kv.contains("BlockSizes")) {
      v.block_sizes = kv["BlockSizes"];
    } else {
      throw std::runtime_error("unexpected line: " + line);
    }
  }
  return v;
}

std::string describe(const ConfView& v) {
  std::string s;
  for (const auto& [name, sw] : v.switches)
    s += fmt::format("switch {} children={} nodes={}\n", name, compress_hostlist({sw.first.begin(), sw.first.end()}),
                     compress_hostlist({sw.second.begin(), sw.second.end()}));
  for (const auto& [name, nodes] : v.blocks) s += fmt::format("block {} nodes={}\n", name, compress_hostlist({nodes.begin(), nodes.end()}));
  return s + "sizes " + v.block_sizes + "\n";
}

// topology.yaml as Slurm reads it: per topology in order, its kind and contents.
std::string read_yaml(const std::string& text) {
  YAML::Node doc = YAML::Load(text);
  std::string s;
  for (const auto& t : doc) {
    s += fmt::format("topology {} default={} flat={}\n", t["topology"].as<std::string>(), t["cluster_default"].as<bool>(),
                     t["flat"] ? t["flat"].as<bool>() : false);
    if (t["tree"]) {
      ConfView v;
      for (const auto& sw : t["tree"]["switches"]) {
        auto& e = v.switches[sw["switch"].as<std::string>()];
        if (sw["children"]) e.first = expand(sw["children"].as<std::string>());
        if (sw["nodes"]) e.second = expand(sw["nodes"].as<std::string>());
      }
      s += describe(v);
    }
    if (t["block"]) {
      ConfView v;
      for (const auto& b : t["block"]["blocks"])
        v.blocks.emplace_back(b["block"].as<std::string>(), b["nodes"] ? expand(b["nodes"].as<std::string>()) : std::set<std::string>{});
      for (const auto& n : t["block"]["block_sizes"]) v.block_sizes += (v.block_sizes.empty() ? "" : ",") + n.as<std::string>();
      s += describe(v);
    }
  }
  return s;
}

std::string model_file(const std::string& name) {
  std::ifstream in(std::string(TOPOSCHED_SOURCE_DIR) + "/tests/data/topograph/models/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- The Go tests' graphs, as Topograph models ----

std::string domain_block(const std::string& sw, const std::string& nodes, const std::string& domain, const std::string& sub = "") {
  std::string s = "- nodes: [\"" + nodes + "\"]\n";
  if (!sw.empty()) s += "  switch: " + sw + "\n";
  if (!domain.empty()) {
    s += "  annotations:\n    accelerator.topology.test/domain: " + domain + "\n";
    if (!sub.empty()) s += "    accelerator.topology.test/sub-domain: " + sub + "\n";
  }
  return s;
}

// translate/output.go GetTreeTestSet(false).
const std::string kTreeSet = "switches:\n  S1: {switches: [S2, S3]}\nblocks:\n" + domain_block("S2", "Node[201-202,205]", "") +
                             domain_block("S3", "Node[304-306]", "");
// translate/topology_test.go getBlockTestSet: domains only, no tree.
const std::string kBlockSet = "blocks:\n" + domain_block("", "Node[104-106]", "B1") + domain_block("", "Node[201-202,205]", "B2");
// translate/topology_test.go getBlockWithIBTestSet (roots l1, r1).
std::string ib_set(bool with_b2 = true) {
  return "switches:\n  l1: {switches: [L2, L3]}\n  r1: {switches: [R2, R3]}\nblocks:\n" + domain_block("L2", "Node[104-106]", "B1") +
         domain_block("L3", "Node[201-202,205]", with_b2 ? "B2" : "") + domain_block("R2", "Node[304-306]", "B3") +
         domain_block("R3", "Node[401-403]", "B4");
}
// translate/output.go GetBlockWithMultiIBTestSet.
const std::string kMultiIbSet =
    "switches:\n  IB1: {switches: [S4]}\n  S4: {switches: [S5, S6]}\n  IB2: {switches: [S1]}\n  S1: {switches: [S2, S3]}\nblocks:\n" +
    domain_block("S2", "Node[104-106]", "B1") + domain_block("S3", "Node[201-202,205]", "B2") +
    domain_block("S5", "Node[301-303]", "B3") + domain_block("S6", "Node[401-403]", "B4");
// translate/topology_test.go getBlockWithDFSIBTestSet.
const std::string kDfsSet = "switches:\n  S0: {switches: [S1, S2, S3]}\n  S1: {switches: [S4]}\n  S3: {switches: [S5]}\nblocks:\n" +
                            domain_block("S4", "Node202", "B1") + domain_block("S2", "Node[104-105]", "B2") +
                            domain_block("S5", "Node205", "B3");
// translate/topology_test.go getBlockWithDiffNumNodeTestSet.
const std::string kDiffSet = "switches:\n  S1: {switches: [S2, S3]}\nblocks:\n" + domain_block("S2", "Node[104-106]", "B1") +
                             domain_block("S3", "Node[201-202,205-206]", "B2");
// translate/block_complement_test.go getBlockWithIBAsymmetricSpineTestSet.
const std::string kAsymSet = "switches:\n  SP1: {switches: [L11, L12, L13, L14]}\n  SP2: {switches: [L21, L22, L23]}\nblocks:\n" +
                             domain_block("L11", "Node[101-103]", "B1") + domain_block("L12", "Node[201-202,205]", "B2") +
                             domain_block("L13", "Node[301-303]", "B3") + domain_block("L14", "Node[401-403]", "B4") +
                             domain_block("L21", "Node[501-503]", "B5") + domain_block("L22", "Node[601-603]", "B6") +
                             domain_block("L23", "Node[701-703]", "B7");

std::string domains_only(const std::vector<std::array<std::string, 3>>& blocks) {  // {nodes, domain, sub}
  std::string s = "blocks:\n";
  for (const auto& b : blocks) s += domain_block("", b[0], b[1], b[2]);
  return s;
}

// "blockNNN=<domain> <nodes>" lines -> Topograph's topology.conf text.
std::string blocks_conf(const std::vector<std::string>& lines, const std::string& sizes) {
  std::string s;
  int n = 0;
  for (const auto& l : lines) {
    ++n;
    auto sp = l.find(' ');
    std::string domain = l.substr(0, sp), nodes = sp == std::string::npos ? "" : l.substr(sp + 1);
    if (!domain.empty() && domain != "-") s += fmt::format("# block{:03}={}\n", n, domain);
    s += fmt::format("BlockName=block{:03}", n) + (nodes.empty() ? "" : " Nodes=" + nodes) + "\n";
  }
  return s + "BlockSizes=" + sizes + "\n";
}

struct PortedCase {
  const char* source;   // Topograph test (file and function) at e2b62507
  std::string model;    // Topograph model YAML
  const char* params;   // Topograph engine params (JSON)
  std::string expected; // Topograph's expected text
};

const char* kTreeConfig = "SwitchName=S1 Switches=S[2-3]\nSwitchName=S2 Nodes=Node[201-202,205]\nSwitchName=S3 Nodes=Node[304-306]\n";
const std::string kBlockConfig1_2 = blocks_conf({"B1 Node[104-106]", "B2 Node[201-202,205]", "B3 Node[304-306]", "B4 Node[401-403]"}, "3");

std::vector<PortedCase> ported_cases() {
  std::vector<std::string> d6x16, d3x72;
  for (int d = 0; d < 6; ++d)
    for (const char* r : {"00-07", "08-15"}) d6x16.push_back(fmt::format("D{} D{}-n[{}]", d, d, r));
  for (int i = 0; i < 4; ++i) d6x16.push_back("-");
  for (int d = 0; d < 3; ++d)
    for (const char* r : {"00-17", "18-35", "36-53", "54-71"}) d3x72.push_back(fmt::format("D{} D{}-n[{}]", d, d, r));
  for (int i = 0; i < 4; ++i) d3x72.push_back("-");
  std::vector<std::string> a_rack, a_single, a_mixed;
  for (int i = 0; i < 8; ++i) {
    std::string r = fmt::format("a-n[{:02}-{:02}]", i * 8, i * 8 + 7);
    a_rack.push_back("a-rack " + r);
    a_single.push_back("a " + r);
  }
  a_mixed = a_single;
  for (auto* v : {&a_rack, &a_single, &a_mixed}) {
    std::string sub = v == &a_single ? "b" : "b-rack";
    v->push_back(sub + " b-n[00-07]");
    v->push_back(sub + " b-n[08-11]");
    for (int i = 0; i < (v == &a_single ? 6 : 2); ++i) v->push_back("-");
  }
  std::vector<std::array<std::string, 3>> unequal{{"a-sd0-h[0-8]", "a", "a.sd0"}, {"a-sd1-h[0-8]", "a", "a.sd1"},
                                                  {"a-sd2-h[0-8]", "a", "a.sd2"}, {"a-sd3-h[0-8]", "a", "a.sd3"},
                                                  {"b-h[00-35]", "b", "b.sd0"}};
  std::vector<std::string> unequal_out{"a.sd0 a-sd0-h[0-8]", "a.sd1 a-sd1-h[0-8]", "a.sd2 a-sd2-h[0-8]",
                                       "a.sd3 a-sd3-h[0-8]", "b.sd0 b-h[00-17]", "b.sd0 b-h[18-35]"};
  for (int i = 0; i < 10; ++i) unequal_out.push_back("-");
  std::vector<std::array<std::string, 3>> small_subs, odd_subs;
  std::vector<std::string> small_out, odd_out;
  for (int sd = 0; sd < 5; ++sd) {
    std::array<std::string, 3> b{fmt::format("d-sd{}-h[0-2]", sd), "d", fmt::format("d.sd{}", sd)};
    std::string line = fmt::format("d.sd{} d-sd{}-h[0-2]", sd, sd);
    odd_subs.push_back(b);
    odd_out.push_back(line);
    if (sd < 4) small_subs.push_back(b), small_out.push_back(line);
  }
  std::vector<std::string> dual_out;
  auto racks = [&](int sw, const std::vector<std::pair<int, std::string>>& r) {
    for (const auto& [rack, nodes] : r) dual_out.push_back(fmt::format("rack-{}-{:02} node[{}]", sw, rack, nodes));
  };
  racks(1, {{1, "0001-0009"}, {2, "0010-0018"}, {4, "0028-0030,0032,0034-0036"}, {5, "0037-0045"}, {6, "0046-0054"},
            {7, "0055-0063"}, {8, "0064-0072"}, {9, "0073-0081"}, {10, "0082-0090"}, {11, "0091-0099"}, {12, "0100-0108"},
            {14, "0118-0126"}, {15, "0127-0135"}, {16, "0136-0144"}});
  dual_out.push_back("-");
  dual_out.push_back("-");
  racks(2, {{1, "0145-0153"}, {2, "0154-0162"}, {3, "0163-0171"}, {4, "0172-0180"}, {5, "0181-0189"}, {6, "0190-0198"},
            {7, "0199-0207"}, {8, "0208-0216"}, {9, "0217-0225"}, {10, "0226-0234"}, {12, "0244-0252"}, {13, "0253-0261"},
            {14, "0262-0270"}, {15, "0271-0275"}, {16, "0280-0288"}});
  dual_out.push_back("-");
  std::vector<std::string> large_out;
  for (int s = 1; s <= 6; ++s)
    for (int l = 1; l <= 2; ++l) large_out.push_back(fmt::format("nvl-{}-{} srv{}{}[01-08]", s, l, s, l));

  return {
      {"translate/topology_test.go TestToTreeTopology", kTreeSet, R"j({"plugin":"topology/tree"})j", kTreeConfig},
      {"engines/slurm/slurm_test.go TestGenerateOutput Case 4 (default plugin)", kTreeSet, "{}", kTreeConfig},
      {"server/engine_test.go TestEngine (small-tree.yaml)", model_file("small-tree.yaml"), "{}",
       "SwitchName=S1 Switches=S[2-3]\nSwitchName=S2 Nodes=I[21-22,25]\nSwitchName=S3 Nodes=I[34-36]\n"},
      {"translate/topology_test.go TestToBlockTopology", kBlockSet, R"j({"plugin":"topology/block","blockSizes":[3]})j",
       blocks_conf({"B1 Node[104-106]", "B2 Node[201-202,205]"}, "3")},
      {"translate/topology_test.go TestToBlockTopologyWithFormattedBlockNames", kBlockSet,
       R"j({"plugin":"topology/block","blockName":{"nodeNameRegexp":"^Node([0-9])[0-9]{2}$","format":"domain${1}"}})j",
       "# domain1=B1\nBlockName=domain1 Nodes=Node[104-106]\n# domain2=B2\nBlockName=domain2 Nodes=Node[201-202,205]\nBlockSizes=3,6\n"},
      {"translate/topology_test.go TestToBlockMultiIBTopology", kMultiIbSet, R"j({"plugin":"topology/block","blockSizes":[3]})j",
       blocks_conf({"B1 Node[104-106]", "B2 Node[201-202,205]", "B3 Node[301-303]", "B4 Node[401-403]"}, "3")},
      {"translate/topology_test.go TestToBlockIBTopology", ib_set(), R"j({"plugin":"topology/block","blockSizes":[3]})j", kBlockConfig1_2},
      {"translate/block_complement_test.go TestNoComplementSingleBlockSize", ib_set(), R"j({"plugin":"topology/block","blockSizes":[3]})j",
       kBlockConfig1_2},
      {"translate/topology_test.go TestToBlockDiffNumNode", kDiffSet, R"j({"plugin":"topology/block"})j",
       blocks_conf({"B1 Node[104-106]", "B2 Node[201-202,205-206]"}, "3,6")},
      {"translate/topology_test.go TestToBlockDFSIBTopology", kDfsSet, R"j({"plugin":"topology/block","blockSizes":[1]})j",
       blocks_conf({"B1 Node202", "B2 Node104", "B2 Node105", "B3 Node205"}, "1")},
      {"translate/block_test.go TestGenerateTopologyConfig (full output)", ib_set(), R"j({"plugin":"topology/block","blockSizes":[2,4,8]})j",
       blocks_conf({"B1 Node[104-105]", "B1 Node106", "B2 Node[201-202]", "B2 Node205", "B3 Node[304-305]", "B3 Node306",
                    "B4 Node[401-402]", "B4 Node403"}, "2,4,8")},
      {"translate/block_test.go TestGenerateTopologyConfig (skeleton only)", ib_set(),
       R"j({"plugin":"topology/block","blockSizes":[2,4,8],"skeletonOnly":true})j",
       blocks_conf({"B1", "B1", "B2", "B2", "B3", "B3", "B4", "B4"}, "2,4,8")},
      {"translate/block_complement_test.go TestComplementMissingBaseBlock", ib_set(false),
       R"j({"plugin":"topology/block","blockSizes":[4,8,16]})j",
       blocks_conf({"B1 Node[104-106]", "B3 Node[304-306]", "B4 Node[401-403]", "-"}, "4,8,16")},
      {"translate/block_complement_test.go TestComplementMissingLeafSegment", kAsymSet,
       R"j({"plugin":"topology/block","blockSizes":[4,16,32]})j",
       blocks_conf({"B1 Node[101-103]", "B2 Node[201-202,205]", "B3 Node[301-303]", "B4 Node[401-403]", "B5 Node[501-503]",
                    "B6 Node[601-603]", "B7 Node[701-703]", "-"}, "4,16,32")},
      {"translate/block_complement_test.go TestComplementKeepsSeparateAccelerators",
       domains_only({{"Node[101-103]", "B1", ""}, {"Node[201-202,205]", "B2", ""}}), R"j({"plugin":"topology/block","blockSizes":[8,16]})j",
       blocks_conf({"B1 Node[101-103]", "B2 Node[201-202,205]"}, "8,16")},
      {"translate/block_complement_test.go TestComplementExcessHostsPerAccelerator", domains_only({{"Node[100-111]", "B1", ""}}),
       R"j({"plugin":"topology/block","blockSizes":[4,8,16]})j",
       blocks_conf({"B1 Node[100-103]", "B1 Node[104-107]", "B1 Node[108-111]", "-"}, "4,8,16")},
      {"translate/block_complement_test.go TestComplementMultiGroupRootExpansion6x16",
       domains_only({{"D0-n[00-15]", "D0", ""}, {"D1-n[00-15]", "D1", ""}, {"D2-n[00-15]", "D2", ""}, {"D3-n[00-15]", "D3", ""},
                     {"D4-n[00-15]", "D4", ""}, {"D5-n[00-15]", "D5", ""}}),
       R"j({"plugin":"topology/block","blockSizes":[8,64]})j", blocks_conf(d6x16, "8,64")},
      {"translate/block_complement_test.go TestComplementMultiGroupRootExpansion3x72",
       domains_only({{"D0-n[00-71]", "D0", ""}, {"D1-n[00-71]", "D1", ""}, {"D2-n[00-71]", "D2", ""}}),
       R"j({"plugin":"topology/block","blockSizes":[18,144]})j", blocks_conf(d3x72, "18,144")},
      {"translate/block_complement_test.go TestComplementMixedDomainSizesLCMPadding",
       domains_only({{"a-n[00-63]", "a", "a-rack"}, {"b-n[00-11]", "b", "b-rack"}}), R"j({"plugin":"topology/block","blockSizes":[8,32]})j",
       blocks_conf(a_rack, "8,32")},
      {"translate/block_complement_test.go TestComplementSingleLevelMixedOversizedDomainsPreservesUniformSlots",
       domains_only({{"a-n[00-63]", "a", ""}, {"b-n[00-11]", "b", ""}}), R"j({"plugin":"topology/block","blockSizes":[8,32]})j",
       blocks_conf(a_single, "8,32")},
      {"translate/block_complement_test.go TestComplementMixedLevelDomainsUseDualLevelSizing",
       domains_only({{"a-n[00-63]", "a", ""}, {"b-n[00-11]", "b", "b-rack"}}), R"j({"plugin":"topology/block","blockSizes":[8,32]})j",
       blocks_conf(a_mixed, "8,32")},
      {"translate/block_complement_test.go TestComplementUnequalDomainSubDomainCounts", domains_only(unequal),
       R"j({"plugin":"topology/block","blockSizes":[18,72,288]})j", blocks_conf(unequal_out, "18,72,288")},
      {"translate/block_complement_test.go TestComplementOverflowRoundedToAggregateBoundary",
       domains_only({{"a-sd0-h[0-2]", "a", "a.sd0"}, {"a-sd1-h[0-2]", "a", "a.sd1"}, {"a-sd2-h[0-2]", "a", "a.sd2"},
                     {"a-sd3-h[0-2]", "a", "a.sd3"}, {"a-sd4-h[0-2]", "a", "a.sd4"}, {"b-sd0-h[0-1]", "b", "b.sd0"},
                     {"b-sd1-h[0-1]", "b", "b.sd1"}, {"b-sd2-h[0-1]", "b", "b.sd2"}, {"b-sd3-h[0-1]", "b", "b.sd3"}}),
       R"j({"plugin":"topology/block","blockSizes":[8,32]})j",
       blocks_conf({"a.sd0 a-sd0-h[0-2]", "a.sd1 a-sd1-h[0-2]", "a.sd2 a-sd2-h[0-2]", "a.sd3 a-sd3-h[0-2]", "a.sd4 a-sd4-h[0-2]",
                    "-", "-", "-", "b.sd0 b-sd0-h[0-1]", "b.sd1 b-sd1-h[0-1]", "b.sd2 b-sd2-h[0-1]", "b.sd3 b-sd3-h[0-1]"}, "8,32")},
      {"translate/block_complement_test.go TestComplementSmallSubDomainsRecursePerChild", domains_only(small_subs),
       R"j({"plugin":"topology/block","blockSizes":[8,32]})j", blocks_conf(small_out, "8,32")},
      {"translate/block_complement_test.go TestComplementOddSubDomainCount", domains_only(odd_subs),
       R"j({"plugin":"topology/block","blockSizes":[8]})j", blocks_conf(odd_out, "8")},
      {"translate/block_complement_test.go TestComplementFormatterProducesPerSubDomainBlocks",
       domains_only({{"r1-h[0-1]", "d", "r1"}, {"r2-h[0-1]", "d", "r2"}, {"r3-h[0-1]", "d", "r3"}, {"r4-h[0-1]", "d", "r4"}}),
       R"j({"plugin":"topology/block","blockSizes":[8,16],"blockName":{"nodeNameRegexp":"^(r[0-9]+)-","format":"${1}"}})j",
       "# r1=r1\nBlockName=r1 Nodes=r1-h[0-1]\n# r2=r2\nBlockName=r2 Nodes=r2-h[0-1]\n# r3=r3\nBlockName=r3 Nodes=r3-h[0-1]\n"
       "# r4=r4\nBlockName=r4 Nodes=r4-h[0-1]\nBlockSizes=8,16\n"},
      // B2 has nodes but no entry in the domain map: its nodes are in no accelerator domain,
      // so only B1 is complemented (block001 and one padding slot up to blockSizes[last]=4).
      {"translate/block_complement_test.go TestComplementWithMissingDomain",
       domains_only({{"n[1-2]", "B1", ""}, {"n[3-4]", "", ""}}), R"j({"plugin":"topology/block","blockSizes":[2,4]})j",
       "# block001=B1\nBlockName=block001 Nodes=n[1-2]\nBlockName=block002\nBlockSizes=2,4\n"},
      {"translate/block_complement_test.go TestComplementSingleLevelOversizedDomain", domains_only({{"h[0-4]", "d", ""}}),
       R"j({"plugin":"topology/block","blockSizes":[2]})j", blocks_conf({"d h[0-1]", "d h[2-3]", "d h4"}, "2")},
      {"translate/block_complement_test.go TestComplementDualLevel (dual-xclr-irregular.yaml)", model_file("dual-xclr-irregular.yaml"),
       R"j({"plugin":"topology/block","blockSizes":[9,144]})j", blocks_conf(dual_out, "9,144")},
      {"translate/block_complement_test.go TestComplementSubDomainGranularityWithoutBlockSizes",
       domains_only({{"NodeA[001-008]", "fabric-1", "fabric-1.rack-a"}, {"NodeB[001-008]", "fabric-1", "fabric-1.rack-b"}}),
       R"j({"plugin":"topology/block"})j", blocks_conf({"fabric-1.rack-a NodeA[001-008]", "fabric-1.rack-b NodeB[001-008]"}, "8,16")},
      {"server/http_server_test.go TestServerLocal Case 5 (large.yaml, block)", model_file("large.yaml"),
       R"j({"plugin":"topology/block","blockSizes":[8,16,32]})j", blocks_conf(large_out, "8,16,32")},
      // topology.yaml (translate/yaml_test.go, block_complement_test.go)
      {"translate/yaml_test.go TestTreeYamlTopology", kTreeSet,
       R"j({"topologies":{"topo1":{"plugin":"topology/tree","nodes":["Node[201,205]"]},"topo2":{"plugin":"topology/tree","nodes":["Node[304,305]"],"clusterDefault":true}}})j",
       "- topology: topo1\n  cluster_default: false\n  tree:\n    switches:\n        - switch: S1\n          children: S2\n"
       "        - switch: S2\n          nodes: Node[201,205]\n- topology: topo2\n  cluster_default: true\n  tree:\n    switches:\n"
       "        - switch: S1\n          children: S3\n        - switch: S3\n          nodes: Node[304-305]\n"},
      {"translate/yaml_test.go TestTreeYamlTopology (skeleton)", kTreeSet,
       R"j({"skeletonOnly":true,"topologies":{"topo1":{"plugin":"topology/tree","nodes":["Node[201,205]"]},"topo2":{"plugin":"topology/tree","nodes":["Node[304,305]"],"clusterDefault":true}}})j",
       "- topology: topo1\n  cluster_default: false\n  tree:\n    switches:\n        - switch: S1\n          children: S2\n"
       "        - switch: S2\n- topology: topo2\n  cluster_default: true\n  tree:\n    switches:\n"
       "        - switch: S1\n          children: S3\n        - switch: S3\n"},
      {"translate/yaml_test.go TestBlockYamlTopology", kMultiIbSet,
       R"j({"topologies":{"topo1":{"plugin":"topology/block","nodes":["Node[104,105]"],"clusterDefault":true},"topo2":{"plugin":"topology/block","nodes":["Node[301,303]"]}}})j",
       "- topology: topo1\n  cluster_default: true\n  block:\n    block_sizes:\n        - 2\n    blocks:\n        - block: block1\n"
       "          nodes: Node[104-105]\n- topology: topo2\n  cluster_default: false\n  block:\n    block_sizes:\n        - 2\n"
       "    blocks:\n        - block: block1\n          nodes: Node[301,303]\n"},
      {"translate/yaml_test.go TestBlockYamlTopology (skeleton)", kMultiIbSet,
       R"j({"skeletonOnly":true,"topologies":{"topo1":{"plugin":"topology/block","nodes":["Node[104,105]"],"clusterDefault":true},"topo2":{"plugin":"topology/block","nodes":["Node[301,303]"]}}})j",
       "- topology: topo1\n  cluster_default: true\n  block:\n    block_sizes:\n        - 2\n    blocks:\n        - block: block1\n"
       "- topology: topo2\n  cluster_default: false\n  block:\n    block_sizes:\n        - 2\n    blocks:\n        - block: block1\n"},
      {"translate/yaml_test.go TestMixedYamlTopology", kMultiIbSet,
       R"j({"topologies":{"topo1":{"plugin":"topology/tree","nodes":["Node[201,205]"]},
           "topo2":{"plugin":"topology/tree","nodes":["Node[104,105]","Node[201,205-207]","Node[401-403]"]},
           "topo3":{"plugin":"topology/block","nodes":["Node[104-105,107-108]"]},
           "topo4":{"plugin":"topology/block","nodes":["Node[301,302,303]"],"blockSizes":[2]},
           "topo5":{"plugin":"topology/flat","clusterDefault":true}}})j",
       "- topology: topo1\n  cluster_default: false\n  tree:\n    switches:\n        - switch: IB2\n          children: S1\n"
       "        - switch: S1\n          children: S3\n        - switch: S3\n          nodes: Node[201,205]\n"
       "- topology: topo2\n  cluster_default: false\n  tree:\n    switches:\n        - switch: IB1\n          children: S4\n"
       "        - switch: IB2\n          children: S1\n        - switch: S4\n          children: S6\n        - switch: S1\n"
       "          children: S[2-3]\n        - switch: S6\n          nodes: Node[401-403]\n        - switch: S2\n"
       "          nodes: Node[104-105]\n        - switch: S3\n          nodes: Node[201,205]\n"
       "- topology: topo3\n  cluster_default: false\n  block:\n    block_sizes:\n        - 2\n    blocks:\n        - block: block1\n"
       "          nodes: Node[104-105]\n- topology: topo4\n  cluster_default: false\n  block:\n    block_sizes:\n        - 2\n"
       "    blocks:\n        - block: block1\n          nodes: Node[301-302]\n        - block: block2\n          nodes: Node303\n"
       "- topology: topo5\n  cluster_default: true\n  flat: true\n"},
      {"translate/yaml_test.go TestBlockOnlyYamlTopology",
       domains_only({{"Node[104-106]", "B1", ""}, {"Node[201-202,205]", "B2", ""}, {"Node[301-303]", "B3", ""}, {"Node[401-403]", "B4", ""}}),
       R"j({"topologies":{"topo1":{"plugin":"topology/block","nodes":["Node[104,105]"],"clusterDefault":true},"topo2":{"plugin":"topology/block","nodes":["Node[301,303]"]}}})j",
       "- topology: topo1\n  cluster_default: true\n  block:\n    block_sizes:\n        - 2\n    blocks:\n        - block: block1\n"
       "          nodes: Node[104-105]\n- topology: topo2\n  cluster_default: false\n  block:\n    block_sizes:\n        - 2\n"
       "    blocks:\n        - block: block1\n          nodes: Node[301,303]\n"},
      {"translate/yaml_test.go TestEmptyPartitionTopology", kMultiIbSet,
       R"j({"topologies":{"topo1":{"plugin":"topology/tree","nodes":["Node[201,205]"]},"topo2":{"plugin":"topology/tree","nodes":["NodeIsDown"]},
           "topo3":{"plugin":"topology/block","nodes":["Node[104-105,107-108]"]},"topo4":{"plugin":"topology/block","nodes":["NodeIsDown"],"blockSizes":[2]},
           "topo5":{"plugin":"topology/flat","clusterDefault":true}}})j",
       "- topology: topo1\n  cluster_default: false\n  tree:\n    switches:\n        - switch: IB2\n          children: S1\n"
       "        - switch: S1\n          children: S3\n        - switch: S3\n          nodes: Node[201,205]\n"
       "- topology: topo2\n  cluster_default: false\n  flat: true\n- topology: topo3\n  cluster_default: false\n  block:\n"
       "    block_sizes:\n        - 2\n    blocks:\n        - block: block1\n          nodes: Node[104-105]\n"
       "- topology: topo4\n  cluster_default: false\n  flat: true\n- topology: topo5\n  cluster_default: true\n  flat: true\n"},
      {"translate/yaml_test.go TestGetBlockTopologyUnitComplementEmptyNodes; block_complement_test.go TestGetBlockTopologyUnitWithMultiAcceleratorDomains",
       domains_only({{"n[10-12]", "a1", ""}, {"n[20-21]", "a2", ""}, {"n[31-33]", "a3", ""}}),
       R"j({"topologies":{"topo1":{"plugin":"topology/block","nodes":["n[10-12]","n[20-21]","n[31-33]"],"blockSizes":[2,4]}}})j",
       "- topology: topo1\n  cluster_default: false\n  block:\n    block_sizes:\n        - 2\n        - 4\n    blocks:\n"
       "        - block: block1\n          nodes: n[10-11]\n        - block: block2\n          nodes: n12\n"
       "        - block: block3\n          nodes: n[20-21]\n        - block: block4\n        - block: block5\n"
       "          nodes: n[31-32]\n        - block: block6\n          nodes: n33\n"},
      {"translate/topology_test.go TestBlockTopologyYamlWithFormattedBlockNames", kBlockSet,
       R"j({"topologies":{"topo":{"plugin":"topology/block","blockSizes":[3],"nodes":["Node[104-106,201-202,205]"],
           "blockName":{"nodeNameRegexp":"^Node([0-9])[0-9]{2}$","format":"domain${1}"}}}})j",
       "- topology: topo\n  cluster_default: false\n  block:\n    block_sizes:\n        - 3\n    blocks:\n"
       "        - block: domain1\n          nodes: Node[104-106]\n        - block: domain2\n          nodes: Node[201-202,205]\n"},
      {"translate/block_complement_test.go TestGetBlockTopologyUnitSingleBlockSize",
       domains_only({{"n[10-12]", "a1", ""}, {"n[20-21]", "a2", ""}, {"n[31-33]", "a3", ""}}),
       R"j({"topologies":{"topo1":{"plugin":"topology/block","nodes":["n[10-12]","n[20-21]","n[31-33]"],"blockSizes":[2]}}})j",
       "- topology: topo1\n  cluster_default: false\n  block:\n    block_sizes:\n        - 2\n    blocks:\n"
       "        - block: block1\n          nodes: n[10-11]\n        - block: block2\n          nodes: n12\n"
       "        - block: block3\n          nodes: n[20-21]\n        - block: block4\n          nodes: n[31-32]\n"
       "        - block: block5\n          nodes: n33\n"},
  };
}

class PortedTopographCase : public ::testing::TestWithParam<std::size_t> {};

TEST_P(PortedTopographCase, GivesTopographsTextAsSlurmReadsIt) {
  static const std::vector<PortedCase> cases = ported_cases();
  const PortedCase& tc = cases[GetParam()];
  SCOPED_TRACE(tc.source);
  auto cluster = load_cluster_text(tc.model, "model.yaml");
  ASSERT_TRUE(cluster) << cluster.error().to_string();
  auto params = topograph_params_from_json(nlohmann::json::parse(tc.params));
  ASSERT_TRUE(params) << params.error().to_string();
  auto out = generate_topograph(*cluster, *params);
  ASSERT_TRUE(out) << out.error().to_string();
  if (params->topologies.empty()) {
    ConfView got = read_conf(out->text), want = read_conf(tc.expected);
    EXPECT_FALSE(want.switches.empty() && want.blocks.empty());
    EXPECT_EQ(describe(got), describe(want)) << out->text;
  } else {
    EXPECT_EQ(read_yaml(out->text), read_yaml(tc.expected)) << out->text;
  }
}

// The comparison is not vacuous: order, names, node sets and sizes all count.
TEST(TopographCompat, ComparisonSeesWhatSlurmSees) {
  const std::string base = blocks_conf({"B1 n[1-2]", "B2 n[3-4]"}, "2,4");
  EXPECT_EQ(describe(read_conf(base)), describe(read_conf("# x\nBlockName=block001 Nodes=n1,n2\nBlockName=block002 Nodes=n[3-4]\nBlockSizes=2,4\n")));
  for (const std::string& other : {blocks_conf({"B2 n[3-4]", "B1 n[1-2]"}, "2,4"), blocks_conf({"B1 n[1-2]", "B2 n[3-5]"}, "2,4"),
                                   blocks_conf({"B1 n[1-2]", "B2 n[3-4]"}, "2"), blocks_conf({"B1 n[1-2]", "B2 n[3-4]", "-"}, "2,4")})
    EXPECT_NE(describe(read_conf(base)), describe(read_conf(other))) << other;
  EXPECT_NE(describe(read_conf("SwitchName=s1 Nodes=n1\n")), describe(read_conf("SwitchName=s1 Nodes=n2\n")));
  EXPECT_EQ(describe(read_conf("SwitchName=s1 Switches=a\nSwitchName=s1 Nodes=n1\n")),
            describe(read_conf("SwitchName=s1 Switches=a Nodes=n1\n")));
}

INSTANTIATE_TEST_SUITE_P(Topograph, PortedTopographCase, ::testing::Range<std::size_t>(0, ported_cases().size()));

// translate/topology_test.go TestToSlurmNameShortener: hpcislandid-1 > network-block-1|2 >
// local-block-1|2 > node-1|2, with Topograph's switch.L.N names.
TEST(TopographCompat, NameShortenerNamesSwitchesAsTopographDoes) {
  auto cluster = load_cluster_text(
      "switches:\n  hpcislandid-1: {switches: [network-block-1, network-block-2]}\n  network-block-1: {switches: [local-block-1]}\n"
      "  network-block-2: {switches: [local-block-2]}\nblocks:\n- {switch: local-block-1, nodes: [node-1]}\n"
      "- {switch: local-block-2, nodes: [node-2]}\n",
      "short.yaml");
  ASSERT_TRUE(cluster) << cluster.error().to_string();
  ExportOptions options;
  options.name_shortener = true;
  auto out = export_cluster(*cluster, "slurm-tree", options);
  ASSERT_TRUE(out) << out.error().to_string();
  const std::string expected =
      "# switch.3.1=hpcislandid-1\nSwitchName=switch.3.1 Switches=switch.2.[1-2]\n# switch.2.1=network-block-1\n"
      "SwitchName=switch.2.1 Switches=switch.1.1\n# switch.2.2=network-block-2\nSwitchName=switch.2.2 Switches=switch.1.2\n"
      "# switch.1.1=local-block-1\nSwitchName=switch.1.1 Nodes=node-1\n# switch.1.2=local-block-2\nSwitchName=switch.1.2 Nodes=node-2\n";
  EXPECT_EQ(describe(read_conf(out->text)), describe(read_conf(expected)));
  for (const char* comment : {"# switch.3.1=hpcislandid-1\n", "# switch.1.2=local-block-2\n"})
    EXPECT_NE(out->text.find(comment), std::string::npos) << out->text;
}

// engines/slurm/slurm_test.go TestGetTranslateConfig and TestGenerateOutput Case 3: the
// parameter checks, with Topograph's messages.
TEST(TopographCompat, ParameterErrorsAreTopographs) {
  const std::pair<const char*, const char*> cases[] = {
      {R"j({"plugin":"topology/block","blockSizes":[2,6]})j", "blockSizes[1]=6 must be a power-of-two multiple of blockSizes[0]=2"},
      {R"j({"plugin":"topology/block","blockSizes":[2,5]})j", "blockSizes[1]=5 must be a multiple of blockSizes[0]=2"},
      {R"j({"plugin":"topology/block","blockSizes":[1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576]})j",
       "blockSizes has too many entries (21); max allowed is 20"},
      {R"j({"plugin":"topology/block","blockSizes":[65537]})j", "blockSizes[0]=65537 exceeds maximum allowed value 65536"},
      {R"j({"topologies":{"topo":{"plugin":"topology/block","blockSizes":[2,6],"nodes":["node[001-100]"]}}})j",
       "topology \"topo\": blockSizes[1]=6 must be a power-of-two multiple of blockSizes[0]=2"},
      {R"j({"plugin":"topology/block","blockName":{"nodeNameRegexp":"[","format":"${1}"}})j", "invalid blockName.nodeNameRegexp \"[\""},
      {R"j({"plugin":"topology/block","blockName":{"format":"${1}"}})j", "blockName.nodeNameRegexp must not be empty"},
      {R"j({"plugin":"topology/block","blockName":{"nodeNameRegexp":"^node([0-9]+)"}})j", "blockName.format must not be empty"},
      {R"j({"topologies":{"topo1":{"plugin":"topology/block","nodes":["node[001-100]"]},"topo2":{"plugin":"topology/tree"}}})j",
       "topology \"topo2\": give its 'nodes'"},
  };
  for (const auto& [json, message] : cases) {
    auto p = topograph_params_from_json(nlohmann::json::parse(json));
    ASSERT_FALSE(p) << json;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(p.error().message.find(message), std::string::npos) << p.error().message;
  }
  // translate/topology_test.go TestValidateConfig: what the cluster must have.
  auto tree = load_cluster_text(kTreeSet, "tree.yaml");
  ASSERT_TRUE(tree);
  TopographParams both;
  both.plugin = "topology/tree";
  both.topologies.push_back({"t", "topology/flat", {}, {}, {}, true});
  EXPECT_FALSE(generate_topograph(*tree, both));
  TopographParams tree_name;
  tree_name.plugin = "topology/tree";
  tree_name.block_name = BlockNameRule{"^(S)", "$1"};
  auto refused = generate_topograph(*tree, tree_name);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("blockName is only supported with plugin \"topology/block\""), std::string::npos);
}

// translate/topology_test.go TestBlockTopologyYamlBlockNameErrorIncludesDomain.
TEST(TopographCompat, PartitionBlockNameErrorNamesTopologyAndDomain) {
  auto c = load_cluster_text(kBlockSet, "m.yaml");
  ASSERT_TRUE(c);
  auto p = topograph_params_from_json(nlohmann::json::parse(
      R"j({"topologies":{"topo":{"plugin":"topology/block","nodes":["Node[104-106]"],"blockName":{"nodeNameRegexp":"^gpu([0-9]+)$","format":"domain${1}"}}}})j"));
  ASSERT_TRUE(p) << p.error().to_string();
  auto out = generate_topograph(*c, *p);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().message,
            R"m(topology "topo": node "Node104" in block "block1" (domain "B1") does not match nodeNameRegexp "^gpu([0-9]+)$")m");
}

// translate/topology_test.go TestBlockNameFormatter.
TEST(TopographCompat, BlockNameFormatterFollowsGoExpand) {
  BlockNameRule rule{"d([0-9]{2})-r([0-9]{2})", "domain${1}_rack${2}"};
  EXPECT_EQ(expand_block_name(rule, "gpu-d05-r04-srv4"), "domain05_rack04");  // unanchored
  EXPECT_EQ(expand_block_name({"^(?P<rack>r[0-9]+)-", "$rack-$$-${1}x"}, "r7-h0"), "r7-$-r7x");
  EXPECT_EQ(expand_block_name({"^(r)", "$1x"}, "r1"), "");  // $1x is ${1x}, an unknown group
  EXPECT_EQ(expand_block_name({"^domain([0-9]{3})", "block${1}"}, "legacy001"), std::nullopt);
  auto cluster = load_cluster_text(domains_only({{"domain001", "B1", ""}, {"legacy001", "B1", ""}}), "m.yaml");
  ASSERT_TRUE(cluster);
  ExportOptions o;
  o.block_name = BlockNameRule{"^domain([0-9]{3})", "block${1}"};
  auto unmatched = export_cluster(*cluster, "slurm-block", o);
  ASSERT_FALSE(unmatched);
  EXPECT_EQ(unmatched.error().message, R"m(node "legacy001" in block "block001" (domain "B1") does not match nodeNameRegexp "^domain([0-9]{3})")m");
  auto two = load_cluster_text(domains_only({{"domain001", "B1", ""}, {"domain002", "B2", ""}}), "m.yaml");
  ASSERT_TRUE(two);
  o.block_name = BlockNameRule{"^domain[0-9]{3}", "shared"};
  auto dup = export_cluster(*two, "slurm-block", o);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().message, R"m(blocks "block001" and "block002" produce duplicate block name "shared")m");
}

// Every model of Topograph's tests/models/ read as shipped (annotations, implicit leaf
// switches), with the nodes, domains and tiers its comments describe.
TEST(TopographCompat, EveryShippedModelIsRead) {
  struct Expect {
    const char* file;
    std::size_t nodes, domains, tiers;
    bool sub_domains;
  };
  const Expect expects[] = {
      {"small-tree.yaml", 6, 2, 2, false},  {"medium.yaml", 8, 4, 3, false},       {"nvl72.yaml", 72, 4, 3, false},
      {"large.yaml", 96, 12, 3, false},     {"dual-xclr-regular.yaml", 96, 2, 3, true},
      {"dual-xclr-irregular.yaml", 255, 2, 3, true},
  };
  std::size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TOPOSCHED_SOURCE_DIR) + "/tests/data/topograph/models"))
    seen += entry.path().extension() == ".yaml";
  EXPECT_EQ(seen, std::size(expects));
  for (const auto& e : expects) {
    SCOPED_TRACE(e.file);
    auto c = load_cluster_text(model_file(e.file), e.file);
    ASSERT_TRUE(c) << c.error().to_string();
    EXPECT_EQ(c->node_count(), e.nodes);
    EXPECT_EQ(c->domain_count(), e.domains);
    EXPECT_EQ(c->tiers().size(), e.tiers);
    bool sub = false;
    for (std::uint32_t n = 0; n < c->node_count(); ++n) sub = sub || !c->node_sub_domain(NodeId(n)).empty();
    EXPECT_EQ(sub, e.sub_domains);
  }
}

// A domain given on a switch reaches the nodes below it; a block's own wins.
TEST(TopographCompat, SwitchAnnotationsApplyToNodesBelow) {
  auto c = load_cluster_text(
      "switches:\n  top:\n    annotations: {accelerator.topology.test/domain: d-top}\n    switches: [leaf1, leaf2]\n"
      "blocks:\n- {switch: leaf1, nodes: ['a[1-2]']}\n"
      "- {switch: leaf2, nodes: ['b[1-2]'], annotations: {accelerator.topology.test/domain: d-own}}\n",
      "m.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  ASSERT_EQ(c->domain_count(), 2u);
  EXPECT_EQ(c->node_domain(*c->find_node("a1")), *c->find_domain("d-top"));
  EXPECT_EQ(c->node_domain(*c->find_node("b2")), *c->find_domain("d-own"));
  auto bad = load_cluster_text("switches:\n  top: {switches: [leaf1]}\nblocks:\n- {switch: nowhere, nodes: [a1]}\n", "bad.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("nowhere"), std::string::npos);
}

// Truncated and corrupted copies of Topograph's models: a clean error or a cluster, and
// the cluster's Topograph outputs never crash (ASan/UBSan in the debug build).
TEST(TopographCompat, DamagedModelsNeverCrash) {
  const char kNasty[] = {'\0', '\n', ' ', '"', '[', ']', '{', '}', ':', ',', '-', '#', '9', '\xff'};
  auto params = topograph_params_from_json(nlohmann::json::parse(R"j({"plugin":"topology/block","blockSizes":[2,8]})j"));
  ASSERT_TRUE(params);
  int read = 0;
  for (const char* file : {"small-tree.yaml", "medium.yaml", "nvl72.yaml", "dual-xclr-irregular.yaml"}) {
    const std::string original = model_file(file);
    std::mt19937 rng(static_cast<unsigned>(original.size()));
    std::vector<std::string> mutants;
    for (int k = 0; k < 40; ++k) mutants.push_back(original.substr(0, std::uniform_int_distribution<std::size_t>(0, original.size())(rng)));
    for (int k = 0; k < 60; ++k) {
      std::string m = original;
      for (int e = 0; e < 3; ++e) m[std::uniform_int_distribution<std::size_t>(0, m.size() - 1)(rng)] = kNasty[rng() % sizeof(kNasty)];
      mutants.push_back(std::move(m));
    }
    for (const auto& m : mutants) {
      auto c = load_cluster_text(m, file);
      if (!c) {
        EXPECT_FALSE(c.error().message.empty());
        continue;
      }
      ++read;
      for (const auto& out : {generate_topograph(*c, *params), generate_topograph(*c, {}), export_cluster(*c, "slurm-yaml", {})})
        if (!out) {
          EXPECT_FALSE(out.error().message.empty());
        }
    }
  }
  EXPECT_GT(read, 0);
}

// `export --topologies FILE`: Topograph's `topologies` object, alone or under its key.
TEST(TopographCompat, TopologiesFileIsReadWithPositions) {
  auto both = read_topologies("topologies:\n  t1: {plugin: topology/block, nodes: ['n[1-2]'], blockSizes: [2, 4]}\n"
                              "  t0: {plugin: topology/flat, clusterDefault: true}\n", "t.yaml");
  ASSERT_TRUE(both) << both.error().to_string();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].name, "t1");
  EXPECT_EQ((*both)[0].block_sizes, (std::vector<long>{2, 4}));
  EXPECT_TRUE((*both)[1].cluster_default);
  auto bare = read_topologies("{\"t\": {\"plugin\": \"topology/tree\", \"nodes\": [\"a1\"]}}", "t.json");
  ASSERT_TRUE(bare) << bare.error().to_string();
  EXPECT_EQ((*bare)[0].nodes, (std::vector<std::string>{"a1"}));
  auto bad = read_topologies("topologies:\n  t1: {plugin: topology/block, nodes: [a1]}\n  t2: {plugin: topology/tree}\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.file, "t.yaml");
  EXPECT_EQ(bad.error().where.line, 3);
  EXPECT_NE(bad.error().message.find("topology \"t2\": give its 'nodes'"), std::string::npos);
  EXPECT_FALSE(read_topologies("topologies: [a, b]\n", "t.yaml"));
  EXPECT_FALSE(read_topologies("t: {plugin: topology/block, nodes: [a1], blockSizes: [2, 6]}\n", "t.yaml"));
  EXPECT_FALSE(read_topologies("t: {plugin: topology/block, nodes: [a1], colour: red}\n", "t.yaml"));
}

// models/model_test.go TestModelCompletion: the model errors Topograph reports.
TEST(TopographCompat, ModelErrorsAreReported) {
  const std::pair<const char*, const char*> cases[] = {
      {"blocks:\n- nodes: [n1]\n  annotations:\n    accelerator.topology.test/domain: nvl1\n- labels: {}\n", "nodes"},
      {"blocks:\n- nodes: [n1]\n- nodes: [n1]\n", "node 'n1' is in two blocks"},
      {"blocks:\n- switch: missing\n  nodes: [n1]\n", "missing"},
      {"blocks:\n- cb1\n", "a block"},
      {"switches:\n  a:\n    name: b\n", "does not match switch name"},
  };
  for (const auto& [text, message] : cases) {
    auto c = load_cluster_text(text, "inline.yaml");
    ASSERT_FALSE(c) << text;
    EXPECT_NE(c.error().message.find(message), std::string::npos) << c.error().to_string();
    EXPECT_EQ(c.error().where.file, "inline.yaml");
  }
  // Case 1: several blocks on one (implicit) leaf switch, each with its domain.
  auto ok = load_cluster_text(
      "switches:\n  core:\n    switches: [leaf]\nblocks:\n- switch: leaf\n  nodes: [\"n[1-2]\"]\n  annotations:\n"
      "    accelerator.topology.test/domain: nvl1\n- switch: leaf\n  nodes: [n3]\n  annotations:\n"
      "    accelerator.topology.test/domain: nvl2\n",
      "inline.yaml");
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_EQ(ok->node_count(), 3u);
  EXPECT_EQ(ok->domain_count(), 2u);
  EXPECT_EQ(ok->switch_nodes(*ok->find_switch("leaf")).size(), 3u);
}

// topology/domain_test.go TestInferTwoLevelBlockSizes, through the block layout (no sizes
// given): [largest sub-domain, its smallest power-of-two multiple holding the largest domain].
TEST(TopographCompat, TwoLevelBlockSizesAreInferred) {
  auto sizes = [](const std::string& model) {
    auto c = load_cluster_text(model, "m.yaml");
    if (!c) throw std::runtime_error(c.error().to_string());
    return TopographBlockLayout(*c).cluster_blocks({}, {})->sizes;
  };
  EXPECT_EQ(sizes(domains_only({{"a[1-8]", "f1", "f1.rack-a"}, {"b[1-8]", "f1", "f1.rack-b"}})), (std::vector<long>{8, 16}));
  EXPECT_EQ(sizes(domains_only({{"a[1-8]", "f1", "f1.rack-a"}})), (std::vector<long>{8}));
  EXPECT_EQ(sizes(domains_only({{"a[1-8]", "f1", "f1.rack-a"}, {"b[1-4]", "f1", "f1.rack-b"}})), (std::vector<long>{8, 16}));
  // Single-level: Topograph's doubling from the smallest block (getBlockSizes).
  EXPECT_EQ(sizes(domains_only({{"a[1-8]", "d1", ""}, {"b[1-6]", "d2", ""}})), (std::vector<long>{6, 12}));
}

}  // namespace
}  // namespace toposched
