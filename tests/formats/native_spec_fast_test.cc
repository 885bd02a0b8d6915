// The native spec fast path (read_native_spec_fast, formats/native_spec_fast.h) against
// the general path (yaml-cpp and read_native_spec): on the repo's example specs, on plain
// specs it takes, on specs it must leave to the general path (YAML it does not read, every
// kind of error) and on random specs. Where it takes a spec, the cluster is the general
// path's with the same ids in the same order; where it does not, load_cluster_text answers
// as the general path does, errors at the same file:line:col.
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "formats/cluster_format.h"
#include "formats/cluster_source.h"
#include "formats/native_spec.h"
#include "support/cluster_equal.h"
#include "support/fast_path_check.h"
#include "topology/file_io.h"
#include "topology/yaml_document.h"

namespace toposched {
namespace {

Result<Cluster> general(std::string_view text) {
  TOPOSCHED_TRY(root, load_yaml_document(text, "t.yaml"));
  return read_native_spec(root, "t.yaml");
}

// Whether the fast path took `text` (support/fast_path_check.h).
bool check(std::string_view text) {
  return testing::check_fast_path(text, read_native_spec_fast(text, "t.yaml"), general(text),
                                  ClusterFormat::kNativeSpec, "t.yaml");
}

TEST(NativeSpecFast, TheRepositorysExamplesReadAsBefore) {
  int specs = 0, taken = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TOPOSCHED_SOURCE_DIR) + "/examples")) {
    if (e.path().extension() != ".yaml") continue;
    auto text = read_text_file(e.path().string());
    ASSERT_TRUE(text);
    if (detect_cluster_format(*text) != ClusterFormat::kNativeSpec) continue;
    ++specs;
    SCOPED_TRACE(e.path().string());
    taken += check(*text) ? 1 : 0;
  }
  EXPECT_GT(specs, 0);
  auto small = read_text_file(std::string(TOPOSCHED_SOURCE_DIR) + "/examples/cluster-small.yaml");
  ASSERT_TRUE(small);
  EXPECT_TRUE(check(*small));  // node types, tiers and domains by yaml-cpp, the lists by hand
  EXPECT_GT(taken, 0);
}

constexpr const char* kHead = "version: 1\nname: big\nnode_types:\n- name: t\n  gpu: {model: H100, count: 1}\n";

TEST(NativeSpecFast, PlainSpecsTakeTheFastPath) {
  const std::vector<std::string> taken = {
      // as large_inputs writes it
      std::string(kHead) +
          "fabric:\n  tiers: [{name: leaf}]\n  switches:\n  - {name: leaf0, tier: leaf, nodes: \"n0x[00-01]\"}\n"
          "nodes:\n- {names: n0x00, type: t}\n- {names: n0x01, type: t}\n",
      // nodes first, block maps, items at 2 and 4, plain hostlists in block maps, parents,
      // children as one name, cross_root after the switches, a comment inside node_types
      "nodes:\n  - names: b[1-2],a1\n    type: t\n  - type: t\n    names: \"c1\"\nnode_types:\n# the one type\n"
      "- name: t\n  gpu: {model: H100, count: 1}\nfabric:\n  tiers:\n  - {name: leaf}\n  - {name: spine}\n"
      "  switches:\n    - name: l1\n      tier: leaf\n      nodes: a1,b[1-2]\n    - {name: l2, tier: leaf, nodes: c1, "
      "parent: s}\n    - {name: s, tier: spine, switches: l1}\n  cross_root: {bandwidth_GBps: 10}\n",
      // no fabric; a domain
      std::string(kHead) +
          "nodes:\n- {names: \"n[1-4]\", type: t}\naccelerator_domains:\n- {name: d, nodes: \"n[1-2]\", "
          "bandwidth_GBps: 100}\n",
      // fabric without switches
      std::string(kHead) + "fabric:\n  tiers: [{name: leaf}]\nnodes:\n- {names: n1, type: t}\n",
  };
  for (const auto& text : taken) EXPECT_TRUE(check(text)) << text;
}

TEST(NativeSpecFast, EverythingElseIsLeftToTheGeneralPath) {
  const std::string h = kHead;
  const std::string fab = "fabric:\n  tiers: [{name: leaf}, {name: spine}]\n  switches:\n";
  const std::vector<std::string> declined = {
      // valid, but read in ways this path does not
      h + "nodes:\n- {names: n1, type: t}  # one\n",
      h + "nodes:\n- {names: n1, type: &x t}\n",
      h + "nodes:\n-   names: n1\n    type: t\n",
      h + "nodes:\n- {names: 'n1', type: t}\n",
      h + "nodes: [{names: n1, type: t}]\n",
      h + "nodes:\n- {names: n1, type: t}\r\n",
      h + "nodes:\n\t- {names: n1, type: t}\n",
      "---\n" + h + "nodes:\n- {names: n1, type: t}\n",
      // bytes the general path refuses or reads otherwise wherever they are: a comment
      // that is not UTF-8 (found by fuzz_native_spec's comparison), a byte order mark
      "# st\xF9le\n" + h + "nodes:\n- {names: n1, type: t}\n",
      "\xEF\xBB\xBF" + h + "nodes:\n- {names: n1, type: t}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab + "  - {name: l, tier: leaf, nodes: n1, switches: [a, {b: c}]}\n",
      // errors, each at its file:line:col
      h + "nodes:\n",
      h + "nodes: []\n",
      h + "nodes:\n- {names: n1}\n",
      h + "nodes:\n- {type: t}\n",
      h + "nodes:\n- {names: n1, type: u}\n",
      h + "nodes:\n- {names: n1, type: t, bogus: 1}\n",
      h + "nodes:\n- {names: n1, names: n2, type: t}\n",
      h + "nodes:\n- {names: n1, type: t}\n- {names: n1, type: t}\n",
      h + "nodes:\n- {names: \"n[2-1]\", type: t}\n",
      h + "nodes:\n- {names: \"n\\x41\", type: t}\n",
      h + "nodes:\n- {names: n1, type: t}\nnodes:\n- {names: n2, type: t}\n",
      "version: 2\nnode_types:\n- name: t\n  gpu: {model: H100, count: 1}\nnodes:\n- {names: n1, type: t}\n",
      "nodes:\n- {names: n1, type: t}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab,
      h + "nodes:\n- {names: n1, type: t}\n" + fab + "  - {name: l, tier: core}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab + "  - {name: l, tier: leaf}\n  - {name: l, tier: leaf}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab + "  - {name: l, tier: leaf, nodes: n2}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab +
          "  - {name: a, tier: leaf, nodes: n1}\n  - {name: b, tier: leaf, nodes: n1}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab + "  - {name: s, tier: spine, switches: [x]}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab + "  - {name: s, tier: spine, parent: x}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab +
          "  - {name: a, tier: leaf, parent: b}\n  - {name: b, tier: leaf, parent: a}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab + "  - {tier: leaf}\n",
      h + "nodes:\n- {names: n1, type: t}\n" + fab +
          "  - {name: a, tier: leaf}\n  switches:\n  - {name: b, tier: leaf}\n",
      h + "nodes:\n- {names: n1, type: t}\nfabric:\n  switches:\n  - {name: a, tier: leaf}\n",
      h + "nodes:\n- {names: n1, type: t}\nfabric:\n  bogus: 1\n",
      h + "nodes:\n- {names: n1, type: t}\naccelerator_domains:\n- {name: d, nodes: n9}\n",
  };
  for (const auto& text : declined) EXPECT_FALSE(check(text)) << text;
}

// Random small specs: node groups flow or block, names from a small pool (duplicates
// happen), switches with nodes, children or parents (unknown ones, two switches per node
// and cycles happen), sections in either order.
std::string random_spec(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string nodes = "nodes:\n", sw = "fabric:\n  tiers: [{name: leaf}, {name: spine}]\n  switches:\n";
  const int groups = 1 + pick(5), leaves = 1 + pick(3);
  int next = 0;  // groups of consecutive names; sometimes one starts over an earlier one
  for (int g = 0; g < groups; ++g) {
    const int count = 1 + pick(4), first = pick(8) == 0 ? pick(next + 1) : next;
    next = first + count;
    const std::string names =
        count == 1 ? fmt::format("n{}", first) : fmt::format("\"n[{}-{}]\"", first, first + count - 1);
    nodes +=
        pick(2) ? fmt::format("- {{names: {}, type: t}}\n", names) : fmt::format("- names: {}\n  type: t\n", names);
  }
  for (int l = 0; l < leaves; ++l) {
    const int first = pick(next + 1);  // sometimes past the last node
    sw += fmt::format("  - {{name: leaf{}, tier: leaf, nodes: \"n[{}-{}]\"{}}}\n", l, first, first + pick(2),
                      pick(4) == 0 ? fmt::format(", parent: spine{}", pick(2)) : "");
  }
  sw += fmt::format("  - name: spine0\n    tier: spine\n    switches: [leaf{}]\n", pick(leaves + 1));
  const std::string head = kHead;
  return pick(2) ? head + nodes + sw : head + sw + nodes;
}

TEST(NativeSpecFast, RandomSpecsGiveTheGeneralPathsCluster) {
  std::mt19937 rng(34);
  int taken = 0;
  constexpr int kFiles = 400;
  for (int i = 0; i < kFiles; ++i) taken += check(random_spec(rng)) ? 1 : 0;
  EXPECT_GT(taken, kFiles / 20);
  EXPECT_LT(taken, kFiles);
}

// Every byte of a file the fast path takes, deleted or replaced by a space, a line break,
// a colon or a quote: wherever the fast path still takes the result, its cluster is the
// general path's; elsewhere load_cluster_text answers as the general path does.
TEST(NativeSpecFast, EveryByteMutatedGivesTheGeneralPathsAnswer) {
  const std::string base = std::string(kHead) +
                           "nodes:\n- {names: \"n[1-3]\", type: t}\n- names: m1\n  type: t\nfabric:\n"
                           "  tiers: [{name: leaf}, {name: spine}]\n  switches:\n  - {name: l1, tier: leaf, "
                           "nodes: \"n[1-3]\"}\n  - {name: s, tier: spine, switches: [l1]}\n";
  ASSERT_TRUE(check(base));
  EXPECT_GT(testing::taken_under_byte_mutations(base, check), 0);
}

}  // namespace
}  // namespace toposched
