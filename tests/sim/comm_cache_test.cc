// The simulator's cost model (make_comm_model) keeps the ideal side of each job shape's
// estimate: a model that has seen many jobs must answer exactly as a fresh one does.
#include <gtest/gtest.h>

#include "sim/backend.h"
#include "support/preset_cluster.h"

namespace toposched::sim {
namespace {

using toposched::testing::preset;

SimJob job(int gpus, int tp, int pp, int ep, std::string kind) {
  SimJob j;
  j.gpus = gpus;
  j.tp = tp;
  j.pp = pp;
  j.ep = ep;
  j.kind = std::move(kind);
  return j;
}

// `nodes` whole nodes starting at `first`, every `stride`-th node.
std::vector<GpuId> spread(const Cluster& c, int gpus, std::uint32_t first, std::uint32_t stride) {
  std::vector<GpuId> out;
  for (std::uint32_t n = first; static_cast<int>(out.size()) < gpus; n += stride)
    for (int l = 0; l < c.node_gpu_count(NodeId(n)) && static_cast<int>(out.size()) < gpus; ++l)
      out.push_back(c.node_gpu(NodeId(n), l));
  return out;
}

void expect_same(const CommEstimate& a, const CommEstimate& b) {
  EXPECT_EQ(a.slowdown, b.slowdown);  // bit for bit: the same computation
  EXPECT_EQ(a.network_share, b.network_share);
  EXPECT_EQ(a.step.bubble, b.step.bubble);
  EXPECT_EQ(a.step.comm, b.step.comm);
  EXPECT_EQ(a.step.exposed, b.step.exposed);
  ASSERT_EQ(a.uplinks.size(), b.uplinks.size());
  for (std::size_t i = 0; i < a.uplinks.size(); ++i) {
    EXPECT_EQ(a.uplinks[i].uplink, b.uplinks[i].uplink);
    EXPECT_EQ(a.uplinks[i].demand, b.uplinks[i].demand);
  }
}

TEST(CommModelCache, AWarmModelAnswersAsAFreshOne) {
  for (const char* spec : {"dgx-h100?nodes=64", "gb200-nvl72?racks=8"}) {
    const Cluster c = preset(spec);
    auto warm = make_comm_model(c);
    const std::vector<SimJob> jobs = {job(64, 8, 2, 0, "llm-dense"), job(64, 8, 2, 0, "llm-dense"),
                                      job(128, 8, 4, 2, "llm-moe"),  job(16, 0, 0, 0, "dp-vision"),
                                      job(8, 8, 1, 0, "inference"),  job(64, 8, 2, 0, "llm-moe")};
    int spread_seen = 0;
    for (std::uint32_t stride : {1u, 2u, 3u})
      for (const SimJob& j : jobs) {
        SCOPED_TRACE(::testing::Message() << spec << " " << j.kind << " " << j.gpus << " stride " << stride);
        const std::vector<GpuId> gpus = spread(c, j.gpus, stride, stride);
        const CommEstimate cached = warm->estimate(j, gpus);
        const CommEstimate fresh = make_comm_model(c)->estimate(j, gpus);
        expect_same(cached, fresh);
        expect_same(warm->estimate(j, gpus), fresh);  // asked again, from the cache
        spread_seen += cached.slowdown > 1.0;
      }
    EXPECT_GT(spread_seen, 0) << spec << ": no placement was slower than the ideal, so the ideal was not exercised";
  }
}

}  // namespace
}  // namespace toposched::sim
