// Robustness of the discovery readers: every reader runs on truncated and byte-corrupted
// copies of every discovery fixture (seeded, many positions). Each run must end in a clean
// error (a message, and the input's name when it gives a position) or a valid result that
// the merge step accepts or rejects cleanly: never a crash, a hang or a sanitizer report
// (this binary is built with ASan + UBSan in the debug preset).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>

#include "formats/aws_topology.h"
#include "formats/cluster_source.h"
#include "formats/discovery.h"
#include "formats/gcp_instances.h"
#include "formats/oci_topology.h"
#include "formats/ibnetdiscover.h"
#include "formats/k8s_nodes.h"
#include "formats/nvidia_fabric.h"
#include "formats/nvidia_topo.h"
#include "formats/slurm_topology.h"
#include "formats/topograph_model.h"
#include "support/ibnet_generator.h"
#include "topology/file_io.h"

namespace toposched {
namespace {

constexpr const char* kName = "mutant.in";

template <class T>
void check(const Result<T>& r) {
  if (r) return;
  EXPECT_FALSE(r.error().message.empty());
  if (r.error().where.line > 0) {
    EXPECT_EQ(r.error().where.file, kName) << r.error().to_string();
  }
}

void check_merge(const Result<DiscoveredTopology>& t) {
  check(t);
  if (!t) return;
  auto m = merge_discovered({*t}, {});
  if (!m) {
    EXPECT_FALSE(m.error().message.empty());
  }
}

using Reader = std::function<void(std::string_view)>;

const std::vector<std::pair<std::string, Reader>>& readers() {
  static const std::vector<std::pair<std::string, Reader>> all = {
      {"topo -m",
       [](std::string_view t) {
         auto r = read_nvidia_topo(t, kName);
         check(r);
         if (r) {
           DiscoveredTopology d;
           DiscoveredNode n;
           n.name = "node";
           n.hardware = std::make_shared<const NodeType>(r->type);
           d.nodes.push_back(n);
           auto m = merge_discovered({d}, {});
           if (!m) {
             EXPECT_FALSE(m.error().message.empty());
           }
         }
       }},
      {"fabric", [](std::string_view t) { check(read_nvidia_fabric(t, kName)); }},
      {"ibnetdiscover",
       [](std::string_view t) {
         auto r = read_ibnetdiscover(t, kName);
         check(r);
         if (r) check_merge(r->topology);
         IbnetOptions o;
         o.hca_regex = "mlx5_[01]";
         auto f = read_ibnetdiscover(t, kName, o);
         check(f);
         if (f) check_merge(f->topology);
       }},
      {"slurm", [](std::string_view t) { check_merge(read_slurm_topology(t, kName)); }},
      {"topograph", [](std::string_view t) { check_merge(read_topograph_model(t, kName)); }},
      {"k8s", [](std::string_view t) { check_merge(read_k8s_nodes(t, kName, {"example.com/rack=tier-0"})); }},
      {"aws", [](std::string_view t) { check_merge(read_aws_topology(t, kName)); }},
      {"gcp", [](std::string_view t) { check_merge(read_gcp_instances(t, kName)); }},
      {"oci_hosts", [](std::string_view t) { check_merge(read_oci_compute_hosts(t, kName)); }},
      {"oci_rdma", [](std::string_view t) { check_merge(read_oci_rdma_topology(t, kName, "host1")); }},
      {"load_cluster_text", [](std::string_view t) { check(load_cluster_text(t, kName)); }},
  };
  return all;
}

std::vector<std::string> fixture_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TOPOSCHED_TEST_DATA) + "/discovery"))
    if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Bytes a corruption writes: structure characters of every format, digits, controls, high bytes.
constexpr char kNasty[] = {'\0', '\n', '\r', '\t', ' ', '"', '\'', '[',    ']',    '{',   '}', '(',
                           ')',  ':',  ',',  ';',  '=', '#', '\\', '-',    '.',    '*',   '&', '!',
                           '|',  '>',  '0',  '9',  'X', 'N', 'V',  '\x7f', '\xff', '\xc3'};

class DiscoveryRobustness : public ::testing::TestWithParam<std::string> {};

TEST_P(DiscoveryRobustness, TruncatedAndCorruptedCopiesNeverCrash) {
  auto text = read_text_file(GetParam());
  ASSERT_TRUE(text);
  const std::string& original = *text;
  std::seed_seq seed(GetParam().begin(), GetParam().end());
  std::mt19937 rng(seed);
  std::vector<std::string> mutants;
  // Truncations: every line end, plus seeded positions.
  for (std::size_t p = original.find('\n'); p != std::string::npos && mutants.size() < 60;
       p = original.find('\n', p + 1))
    mutants.push_back(original.substr(0, p));
  std::uniform_int_distribution<std::size_t> pos(0, original.empty() ? 0 : original.size() - 1);
  for (int k = 0; k < 60; ++k) mutants.push_back(original.substr(0, pos(rng)));
  // Corruptions: 1 to 4 bytes replaced, deleted or duplicated.
  std::uniform_int_distribution<int> edits(1, 4), kind(0, 2);
  std::uniform_int_distribution<std::size_t> nasty(0, sizeof(kNasty) - 1);
  for (int k = 0; k < 200 && !original.empty(); ++k) {
    std::string m = original;
    for (int e = edits(rng); e > 0 && !m.empty(); --e) {
      std::size_t at = std::uniform_int_distribution<std::size_t>(0, m.size() - 1)(rng);
      switch (kind(rng)) {
        case 0:
          m[at] = kNasty[nasty(rng)];
          break;
        case 1:
          m.erase(at, 1);
          break;
        default:
          m.insert(at, m.substr(at, std::min<std::size_t>(16, m.size() - at)));
          break;
      }
    }
    mutants.push_back(std::move(m));
  }
  for (const auto& [name, read] : readers()) {
    SCOPED_TRACE(name);
    read(original);
    for (const auto& m : mutants) read(m);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DiscoveryRobustness, ::testing::ValuesIn(fixture_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = std::filesystem::path(info.param).filename().string();
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// The benchmark's 10,000-node dump (bench/discovery_ibnet.cc) gives the right tree; the time
// is measured there, in Release, not here.
TEST(DiscoveryScale, TenThousandNodeDump) {
  IbnetGeneratorSpec s;
  s.scalable_units = 250;
  s.nodes_per_su = 40;
  s.rails = 8;
  s.sus_per_pod = 10;
  s.spines = 8;
  s.cores = 8;
  IbnetOptions o;
  o.hca_regex = "mlx5_[0-7]";
  auto r = read_ibnetdiscover(generate_ibnetdiscover(s), "generated.ibnet", o);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->topology.nodes.size(), 10'000u);
  EXPECT_EQ(r->stats.kept_hcas, 80'000);
  EXPECT_EQ(r->stats.leaf_groups, 250);
  EXPECT_EQ(r->topology.tiers.size(), 3u);
  int spines = 0, cores = 0;
  for (const auto& sw : r->topology.switches) {
    spines += sw.tier == 1;
    cores += sw.tier == 2;
  }
  EXPECT_EQ(spines, 25);  // one spine group per pod
  EXPECT_EQ(cores, 1);
  auto m = merge_discovered({r->topology}, {});
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_EQ(m->cluster.node_count(), 10'000u);
}

}  // namespace
}  // namespace toposched
