// Engine commands that hold GPUs another scheduler chose (Command::hold_gpus, used by
// serve --slurm to mirror Slurm's jobs): exact GPUs, conflicts refused, undone with a
// failed commit, released like any job.
#include <gtest/gtest.h>

#include "placement/engine.h"
#include "topology/presets.h"

namespace toposched {
namespace {

Command hold(const Cluster& c, const char* id, int node, std::vector<int> locals) {
  Command cmd;
  cmd.kind = Command::Kind::kPlace;
  cmd.place.job.job_id = id;
  cmd.place.policy = "slurm";
  for (int l : locals) cmd.hold_gpus.push_back(c.node_gpu(NodeId(static_cast<std::uint32_t>(node)), l));
  return cmd;
}

TEST(EngineHold, HoldsExactlyTheGivenGpus) {
  auto c = build_preset("dgx-h100?nodes=4");
  ASSERT_TRUE(c);
  Engine engine(*c, AllocationState(*c));
  auto d = engine.decide_one(hold(*c, "slurm-job:7", 1, {5, 2}), {});
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->gpus_by_rank, hold(*c, "x", 1, {5, 2}).hold_gpus);
  auto answer = nlohmann::json::parse(d->answer_json);
  EXPECT_EQ(answer["job"], "slurm-job:7");
  EXPECT_EQ(answer["policy"], "slurm");
  EXPECT_EQ(answer["gpus"][0]["gpu"], 5);
  EXPECT_EQ(answer["nodes"], c->node_name(NodeId(1)));
  EXPECT_EQ(engine.free_gpus(), 30);
  // The same id again, or a GPU already held: refused, nothing changes.
  auto again = engine.decide_one(hold(*c, "slurm-job:7", 2, {0}), {});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_FALSE(engine.decide_one(hold(*c, "slurm-job:8", 1, {2}), {}));
  EXPECT_EQ(engine.free_gpus(), 30);
  // A failed commit undoes the hold.
  auto failed = engine.decide_one(hold(*c, "slurm-job:9", 3, {0, 1}), [](std::span<const Mutation>) -> Result<void> {
    return make_error(ErrorCode::kUnavailable, "store down");
  });
  EXPECT_FALSE(failed);
  EXPECT_EQ(engine.free_gpus(), 30);
  Command release;
  release.kind = Command::Kind::kRelease;
  release.job_id = "slurm-job:7";
  ASSERT_TRUE(engine.decide_one(release, {}));
  EXPECT_EQ(engine.free_gpus(), 32);
}

}  // namespace
}  // namespace toposched
