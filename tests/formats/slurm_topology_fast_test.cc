// The topology.conf fast path (formats/slurm_topology_fast.h) against the general path
// (read_slurm_topology + merge_discovered): on the repo's fixtures, on plain tree files it
// takes, on files it must leave to the general path (continuations, blocks, duplicates,
// quotes, every kind of error) and on random trees. Where it takes a file, the cluster is
// the general path's with the same ids in the same order; where it does not,
// load_cluster_text answers as the general path does, errors at the same file:line:col.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "formats/cluster_format.h"
#include "formats/cluster_source.h"
#include "formats/discovery.h"
#include "formats/native_spec.h"
#include "formats/slurm_topology.h"
#include "formats/slurm_topology_fast.h"
#include "support/cluster_equal.h"
#include "support/fast_path_check.h"
#include "topology/file_io.h"

namespace toposched {
namespace {

DiscoveryOptions options() {
  DiscoveryOptions o;
  o.cluster_name = "t";  // what load_cluster_text names a cluster read from "t.conf"
  return o;
}

Result<Cluster> general(std::string_view text) {
  return cluster_from_discovered(read_slurm_topology(text, "t.conf"), options(), "t.conf");
}

// Whether the fast path took `text` (support/fast_path_check.h).
bool check(std::string_view text) {
  return testing::check_fast_path(text, slurm_topology_cluster_fast(text, options()), general(text),
                                  ClusterFormat::kSlurmTopologyConf, "t.conf");
}

std::string data(const std::string& name) {
  auto t = read_text_file(std::string(TOPOSCHED_TEST_DATA) + "/discovery/" + name);
  EXPECT_TRUE(t) << name;
  return t ? *t : std::string();
}

TEST(SlurmTopologyFast, TheRepositorysFixturesReadAsBefore) {
  const std::string tree = data("slurm-tree.conf");
  EXPECT_FALSE(check(tree));  // line continuations: the general path
  EXPECT_FALSE(check(data("slurm-block.conf")));
  // The same tree without continuations: the fast path, the same cluster.
  std::string joined;
  for (std::size_t i = 0; i < tree.size(); ++i) {
    if (tree[i] == '\\' && tree.find('\n', i) != std::string::npos) {
      i = tree.find('\n', i);
      while (i + 1 < tree.size() && tree[i + 1] == ' ') ++i;
      if (!joined.ends_with(',')) joined += ' ';  // "Nodes=a,\" goes on with the next name
      continue;
    }
    joined += tree[i];
  }
  EXPECT_TRUE(check(joined)) << joined;
  auto c = load_cluster_text(joined, "t.conf");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node_count(), 16u);
  EXPECT_EQ(c->switch_count(), 7u);
  EXPECT_EQ(c->tiers().size(), 3u);
}

TEST(SlurmTopologyFast, PlainTreesTakeTheFastPath) {
  const char* taken[] = {
      "SwitchName=a Nodes=n1,n2\n",
      "SwitchName=a Nodes=n3,n10,n2\nSwitchName=b Nodes=n1\nSwitchName=top Switches=a,b\n",  // sorted naturally
      "switchname=a NODES=gpu[01-04] linkspeed=100\r\nSwitchName=s Switches=a\r\n",          // case, CRLF
      "  # comment\n\nSwitchName=a\tNodes=n[1-3],m1 # rack\nSwitchName=b Nodes=x[1-2]\n"
      "SwitchName=s1 Switches=a\nSwitchName=s2 Switches=a,b\n",  // a under two spines: the first wins
      "SwitchName=c Switches=s\nSwitchName=s Switches=l[1-2]\nSwitchName=l1 Nodes=n1\nSwitchName=l2 Nodes=n2\n",
      "SwitchName=lone\nSwitchName=a Nodes=n1\n",  // a switch with nothing under it
      "SwitchName=a Nodes=n1 Nodes=n2\n",          // two Nodes= fields
      "SwitchName=a Nodes=r[1-2]-n[1-2]\n",
  };
  for (const char* text : taken) EXPECT_TRUE(check(text)) << text;
}

TEST(SlurmTopologyFast, EverythingElseIsLeftToTheGeneralPath) {
  const char* declined[] = {
      // valid, but read with warnings or in ways this path does not
      "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n1\n",  // a node under two switches
      "SwitchName=a Nodes=n1,n1\n",
      "SwitchName=a Nodes=\"n1,n2\"\n",
      "SwitchName=a Nodes=n1,\\\n  n2\n",
      "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4\n",
      // errors, each at its file:line:col
      "",
      "# only a comment\n",
      "SwitchName=a\n",
      "SwitchName=a Nodes=n[1-2\n",
      "SwitchName=a Nodes=n1,,n2\n",
      "SwitchName=a Nodes=\n",
      "SwitchName=a Nodes=n1,\n",
      "SwitchName=a Nodes=n[2-1]\n",
      "SwitchName=a Bogus=1\n",
      "SwitchName=a Nodes=n1 junk\n",
      "SwitchName=a =x\n",
      "Nodes=n1\n",
      "SwitchName= Nodes=n1\n",
      "SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n",
      "SwitchName=a SwitchName=b Nodes=n1\n",
      "SwitchName=a Switches=b Nodes=n1\n",
      "SwitchName=a Switches=a Nodes=n1\n",
      "SwitchName=a Switches=b Nodes=n1\nSwitchName=b Switches=a\n",
      "SwitchName=a Nodes=n1\nBlockName=b Nodes=n2\n",
      "SwitchName=a Nodes=n\x01\n",
      "SwitchName=a Nodes=n1\nSwitchName=b Switches=a\nSwitchName=c Switches=b\nSwitchName=d Switches=c,a\n"
      "SwitchName=e Switches=d\nSwitchName=f Switches=b\nSwitchName=g Switches=g1\n",
  };
  for (const char* text : declined) EXPECT_FALSE(check(text)) << text;
}

// Random small trees: names from a small pool (duplicates happen), bracket or plain lists
// in any order, spines over random leaves (two parents, unknown children and cycles
// happen), keys in any case, comments and CRLF.
std::string random_conf(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string out;
  const int leaves = 1 + pick(5), spines = pick(3);
  auto key = [&](std::string k) {
    if (pick(4) == 0) std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return std::toupper(c); });
    return k;
  };
  for (int l = 0; l < leaves; ++l) {
    out += fmt::format("{}=leaf{} {}=", key("SwitchName"), l, key("Nodes"));
    const int first = pick(40), count = 1 + pick(6);
    if (pick(3) == 0) {
      out += fmt::format("n[{}-{}]", first, first + count - 1);
    } else {
      std::vector<int> ids;
      for (int k = 0; k < count; ++k) ids.push_back(pick(3) == 0 ? pick(60) : first + k);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (std::size_t k = 0; k < ids.size(); ++k) out += fmt::format("{}n{}", k ? "," : "", ids[k]);
    }
    if (pick(4) == 0) out += " LinkSpeed=200";
    out += pick(5) == 0 ? " # leaf\r\n" : "\n";
  }
  for (int s = 0; s < spines; ++s) {
    out += fmt::format("{}=spine{} {}=leaf{}", key("SwitchName"), s, key("Switches"), pick(leaves + 1));
    if (pick(2) == 0) out += fmt::format(",leaf{}", pick(leaves));
    if (pick(8) == 0) out += fmt::format(",spine{}", pick(spines));
    out += "\n";
  }
  return out;
}

TEST(SlurmTopologyFast, RandomTreesGiveTheGeneralPathsCluster) {
  std::mt19937 rng(34);
  int taken = 0;
  constexpr int kFiles = 400;
  for (int i = 0; i < kFiles; ++i) taken += check(random_conf(rng)) ? 1 : 0;
  // Both paths are exercised.
  EXPECT_GT(taken, kFiles / 5);
  EXPECT_LT(taken, kFiles);
}

// Every byte of a file the fast path takes, deleted or replaced by a space, a line break,
// a colon or a quote: wherever the fast path still takes the result, its cluster is the
// general path's; elsewhere load_cluster_text answers as the general path does.
TEST(SlurmTopologyFast, EveryByteMutatedGivesTheGeneralPathsAnswer) {
  const std::string base =
      "SwitchName=leaf1 Nodes=n[1-3],m1 LinkSpeed=100 # rack\nSwitchName=leaf2 Nodes=x1,x2\n"
      "SwitchName=spine Switches=leaf[1-2]\n";
  ASSERT_TRUE(check(base));
  EXPECT_GT(testing::taken_under_byte_mutations(base, check), 0);
}

}  // namespace
}  // namespace toposched
