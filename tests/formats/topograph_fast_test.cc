// The Topograph model fast path (formats/topograph_fast.h) against the general path
// (yaml-cpp, read_topograph_model, merge_discovered): on the repo's fixture, on plain
// models it takes, on models it must leave to the general path (labels, other layouts,
// YAML it does not read, every kind of error) and on random models. Where it takes a
// model, the cluster is the general path's with the same ids in the same order; where it
// does not, load_cluster_text answers as the general path does, errors at the same
// file:line:col.
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "formats/cluster_format.h"
#include "formats/cluster_source.h"
#include "formats/discovery.h"
#include "formats/native_spec.h"
#include "formats/topograph_fast.h"
#include "formats/topograph_model.h"
#include "support/cluster_equal.h"
#include "support/fast_path_check.h"
#include "topology/file_io.h"
#include "topology/yaml_document.h"

namespace toposched {
namespace {

DiscoveryOptions options() {
  DiscoveryOptions o;
  o.cluster_name = "t";  // what load_cluster_text names a cluster read from "t.yaml"
  return o;
}

Result<Cluster> general(std::string_view text) {
  TOPOSCHED_TRY(root, load_yaml_document(text, "t.yaml"));
  return cluster_from_discovered(read_topograph_model(root, "t.yaml"), options(), "t.yaml");
}

// Whether the fast path took `text` (support/fast_path_check.h).
bool check(std::string_view text) {
  return testing::check_fast_path(text, topograph_model_cluster_fast(text, options()), general(text),
                                  ClusterFormat::kTopographModel, "t.yaml");
}

std::string data(const std::string& name) {
  auto t = read_text_file(std::string(TOPOSCHED_TEST_DATA) + "/discovery/" + name);
  EXPECT_TRUE(t) << name;
  return t ? *t : std::string();
}

// `text` without its `labels:` sections (a key at some indent and the deeper lines after it).
std::string without_labels(const std::string& text) {
  std::string out;
  std::size_t labels_indent = std::string::npos, start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const std::size_t indent = line.find_first_not_of(' ');
    if (labels_indent != std::string::npos && indent != std::string::npos && indent > labels_indent) continue;
    labels_indent = std::string::npos;
    if (indent != std::string::npos && line.compare(indent, 7, "labels:") == 0) {
      labels_indent = indent;
      continue;
    }
    out += line + "\n";
  }
  return out;
}

TEST(TopographFast, TheRepositorysFixtureReadsAsBefore) {
  const std::string model = data("topograph-model.yaml");
  EXPECT_FALSE(check(model));  // labels name accelerator domains: the general path
  const std::string plain = without_labels(model);
  EXPECT_TRUE(check(plain)) << plain;
  auto c = load_cluster_text(plain, "t.yaml");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node_count(), 32u);
  EXPECT_EQ(c->switch_count(), 7u);
  EXPECT_EQ(c->tiers().size(), 3u);
}

TEST(TopographFast, PlainModelsTakeTheFastPath) {
  const char* taken[] = {
      // as large_inputs writes it
      "switches:\n  core: {}\n  leaf000000: {}\nblocks:\n- switch: leaf000000\n  nodes:\n  - n000000x00\n"
      "  - n000000x01\n",
      // blocks first, items at 2, nodes at 6, implicit switches, natural order, comments
      "# a model\nblocks:\n  - name: b1\n    switch: leaf2\n    nodes:\n      - n10\n      - n9\n\n"
      "  - nodes: [m1, \"m[2-3]\"]\n    switch: leaf1\nswitches:\n  top:\n    switches:\n    - spine\n"
      "  spine:\n    switches: [leaf1, leaf2]\n",
      "switches:\n  s:\n    switches:\n      - a\n      - b\n  a:\n  b: {}\nblocks:\n- switch: a\n  nodes:\n"
      "  - x[1-4]\n  - y1,y2\n- switch: b\n  nodes: []\n- switch: b\n  nodes: [ z1 , \"z2,z3\" ]\n",
      "switches:\n  true: {}\nblocks:\n- switch: true\n  nodes: [n1]\n",  // a boolean is a string here
  };
  for (const char* text : taken) EXPECT_TRUE(check(text)) << text;
}

TEST(TopographFast, EverythingElseIsLeftToTheGeneralPath) {
  const char* declined[] = {
      // valid, but read in ways this path does not
      "switches:\n  a:\n    annotations:\n      accelerator.topology.test/domain: d1\nblocks:\n- switch: a\n  nodes: "
      "[n1]\n",
      "switches:\n- name: a\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "capacity_blocks:\n- name: cb\n  nodes: [n1]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: n1 n2\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1]  # comment\n",
      "switches:\n  a: {}\r\nblocks:\r\n- switch: a\r\n  nodes: [n1]\r\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: ['n1']\n",
      "switches:\n  a: &x {}\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "---\nswitches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "switches:\n    a: {}\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "switches:\n  a: {}\nblocks:\n-   switch: a\n    nodes: [n1]\n",
      "switches:\n  a: {}\nblocks:\n- {switch: a, nodes: [n1]}\n",
      "switches:\n  a: {}\nblocks:\n- switch: \"a\"\n  nodes: [n1]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1]\n- switch: a\n  nodes: [n1]\n",  // a node twice
      // errors, each at its file:line:col
      "switches:\n  a: {}\nblocks:\n- nodes: [n1]\n",
      "switches:\n  a: {}\nblocks:\n- switch: b\n  nodes: [n1]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes:\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n[1-]]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [\"n[2-1]\"]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1,]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  bogus: 1\n  nodes: [n1]\n",
      "switches:\n  a: {}\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "switches:\n  a:\n    switches:\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "switches:\n  a:\n    switches: [a]\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "switches:\n  a:\n    switches: [b]\n  b:\n    switches: [a]\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "switches:\n  p:\n    switches: [a]\n  q:\n    switches: [a]\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "switches:\n  null: {}\nblocks:\n- switch: null\n  nodes: [n1]\n",
      "switches:\n  a: {}\nblocks:\n",
      "switches:\n  a: {}\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1]\nblocks:\n- switch: a\n  nodes: [n2]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1]\n  nodes: [n2]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes:\n  - n1\n   - n2\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n\tnodes: [n1]\n",
      "switches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [\"n\\u0031\"]\n",
      // bytes the general path refuses or reads otherwise wherever they are: a comment
      // that is not UTF-8 (found by fuzz_topograph_model's comparison), a byte order mark
      "# st\xF9le\nswitches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1]\n",
      "\xEF\xBB\xBFswitches:\n  a: {}\nblocks:\n- switch: a\n  nodes: [n1]\n",
  };
  for (const char* text : declined) EXPECT_FALSE(check(text)) << text;
}

// Random small models: switches with flow or block children (implicit ones, two parents and
// cycles happen), blocks at two indents with flow or block node lists, names from a small
// pool (duplicates happen), hostlists quoted or plain.
std::string random_model(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int leaves = 1 + pick(5), spines = pick(3);
  std::string sw = "switches:\n", blocks = "blocks:\n";
  for (int s = 0; s < spines; ++s) {
    std::vector<std::string> kids{fmt::format("leaf{}", pick(leaves + 1))};
    if (pick(2) == 0) kids.push_back(fmt::format("leaf{}", pick(leaves)));
    if (pick(8) == 0) kids.push_back(fmt::format("spine{}", pick(spines)));
    if (pick(2) == 0) {
      sw += fmt::format("  spine{}:\n    switches: [{}]\n", s, fmt::join(kids, ", "));
    } else {
      sw += fmt::format("  spine{}:\n    switches:\n", s);
      for (const auto& k : kids) sw += fmt::format("{}- {}\n", pick(2) ? "    " : "      ", k);  // mixed: sometimes bad
    }
  }
  for (int l = 0; l < leaves; ++l)
    if (pick(3) != 0) sw += pick(2) ? fmt::format("  leaf{}: {{}}\n", l) : fmt::format("  leaf{}:\n", l);
  const std::string item = pick(2) ? "- " : "  - ";
  const std::string key = item == "- " ? "  " : "    ";
  for (int l = 0; l < leaves; ++l) {
    blocks += fmt::format("{}switch: leaf{}\n{}nodes:", item, l, key);
    const int first = pick(40), count = 1 + pick(5);
    if (pick(2) == 0) {
      blocks += fmt::format(" [\"n[{}-{}]\", n{}]\n", first, first + count - 1, pick(60));
    } else {
      blocks += "\n";
      for (int k = 0; k < count; ++k) blocks += fmt::format("{}  - n{}\n", key, pick(3) == 0 ? pick(60) : first + k);
    }
  }
  return pick(4) == 0 ? blocks + sw : sw + blocks;
}

TEST(TopographFast, RandomModelsGiveTheGeneralPathsCluster) {
  std::mt19937 rng(34);
  int taken = 0;
  constexpr int kFiles = 400;
  for (int i = 0; i < kFiles; ++i) taken += check(random_model(rng)) ? 1 : 0;
  EXPECT_GT(taken, kFiles / 10);
  EXPECT_LT(taken, kFiles);
}

// Every byte of a file the fast path takes, deleted or replaced by a space, a line break,
// a colon or a quote: wherever the fast path still takes the result, its cluster is the
// general path's; elsewhere load_cluster_text answers as the general path does.
TEST(TopographFast, EveryByteMutatedGivesTheGeneralPathsAnswer) {
  const std::string base =
      "switches:\n  core:\n    switches:\n    - spine\n  spine:\n    switches: [leaf1, leaf2]\n  leaf1: {}\n"
      "blocks:\n- switch: leaf1\n  nodes:\n  - \"n[1-2]\"\n- switch: leaf2\n  nodes: [m1, m2]\n";
  ASSERT_TRUE(check(base));
  EXPECT_GT(testing::taken_under_byte_mutations(base, check), 0);
}

}  // namespace
}  // namespace toposched
