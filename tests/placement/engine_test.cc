// Engine: the place transaction (ids, duplicates, dry runs), request JSON parsing, batches
// whose commit fails leave the state as it was, and concurrent readers see committed state.
#include <atomic>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "placement/engine.h"
#include "topology/presets.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

PlaceRequest request(const char* json) {
  auto r = place_request_from_json(nlohmann::json::parse(json));
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : PlaceRequest{};
}

Command place_command(const char* json) {
  Command c;
  c.kind = Command::Kind::kPlace;
  c.place = request(json);
  return c;
}

TEST(PlaceRequestJson, ReadsEveryKeyTheCliHas) {
  PlaceRequest r = request(
      R"({"job":"j","gpus":16,"tp":8,"pp":2,"ep":1,"cp":1,"policy":"slurm-tree","kind":"training",
          "gpu_model":"H100","switches":1,"seed":7,"exclusive":false})");
  EXPECT_EQ(r.job.job_id, "j");
  EXPECT_EQ(r.job.gpus, 16);
  EXPECT_EQ(r.job.tp, 8);
  EXPECT_EQ(r.job.pp, 2);
  EXPECT_EQ(r.policy, "slurm-tree");
  EXPECT_EQ(r.job.max_switches, 1);
  EXPECT_EQ(r.job.seed, 7u);
  // Round trip through the stored form.
  auto again = place_request_from_json(nlohmann::json::parse(place_request_to_json(r).dump()));
  ASSERT_TRUE(again);
  EXPECT_EQ(place_request_to_json(*again), place_request_to_json(r));
}

TEST(PlaceRequestJson, RejectsUnknownKeysWrongTypesAndNonPositiveSizes) {
  struct Case {
    const char* body;
    const char* message_part;
  } cases[] = {
      {R"({"gpus":8,"colour":"red"})", "unknown key 'colour'"},
      {R"({"gpus":-4})", "'gpus' must be"},
      {R"({"gpus":0})", "'gpus' must be"},
      {R"({"gpus":"8"})", "'gpus' must be an integer"},
      {R"({"gpus":8,"tp":0})", "'tp' must be"},
      {R"({"gpus":8,"kind":"batch"})", "'kind' must be training"},
      {R"({"tp":8})", "exactly one of 'gpus'"},
      {R"({"gpus":8,"nodes":1})", "exactly one of 'gpus'"},
      {R"([1,2])", "expected a JSON object"},
  };
  for (const Case& c : cases) {
    auto r = place_request_from_json(nlohmann::json::parse(c.body));
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << c.body;
    EXPECT_NE(r.error().message.find(c.message_part), std::string::npos) << c.body << ": " << r.error().message;
  }
}

TEST(PlaceJob, NamesJobsRefusesDuplicatesAndHoldsOnlyWhenAsked) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  auto a = place_job(s, request(R"({"gpus":8})"), true);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->job_id, "job-1");
  auto b = place_job(s, request(R"({"gpus":8})"), false);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->job_id, "job-2");
  EXPECT_FALSE(s.has_job("job-2"));  // not held
  auto dup = place_job(s, request(R"({"job":"job-1","gpus":8})"), true);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kConflict);
  auto big = place_job(s, request(R"({"job":"huge","gpus":32})"), true);  // 24 of 32 free
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kInfeasible);
  EXPECT_NE(big.error().message.find("cannot place job 'huge' with policy topo"), std::string::npos);
  auto policy = place_job(s, request(R"({"gpus":8,"policy":"nope"})"), true);
  ASSERT_FALSE(policy);
  EXPECT_EQ(policy.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.job_count(), 1u);
  ASSERT_TRUE(s.check_invariants());
}

TEST(PlaceJob, WithinNodesKeepsTheJobOnThoseNodesAndNamesAnUnknownOne) {
  Cluster c = preset("dgx-h100?nodes=4");
  AllocationState s(c);
  // topo would start at the first node; the hostlist leaves it only the last one.
  auto pinned = place_job(s, request(R"({"job":"ext","gpus":3,"within_nodes":"dgx-h100-004","policy":"first-fit"})"), true);
  ASSERT_TRUE(pinned) << pinned.error().message;
  EXPECT_EQ(pinned->nodes_hostlist, "dgx-h100-004");
  // Two nodes allowed, 5 GPUs left on one of them: a 13-GPU job takes all 13.
  auto two = place_job(s, request(R"({"gpus":13,"within_nodes":"dgx-h100-[003-004]"})"), true);
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(two->nodes_hostlist, "dgx-h100-[003-004]");
  // Nothing left there: refused although other nodes are free.
  auto full = place_job(s, request(R"({"gpus":1,"within_nodes":"dgx-h100-[003-004]"})"), true);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, ErrorCode::kInfeasible);
  auto unknown = place_job(s, request(R"({"gpus":1,"within_nodes":"dgx-h100-[004-005]"})"), true);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.error().message.find("no node named 'dgx-h100-005'"), std::string::npos) << unknown.error().message;
  auto syntax = place_request_from_json(nlohmann::json::parse(R"({"gpus":1,"within_nodes":"dgx-[001-"})"));
  ASSERT_FALSE(syntax);
  EXPECT_NE(syntax.error().message.find("within_nodes"), std::string::npos) << syntax.error().message;
  EXPECT_EQ(s.job_count(), 2u);
  ASSERT_TRUE(s.check_invariants());
}

TEST(Engine, AFailedCommitUndoesTheWholeBatch) {
  Cluster c = preset("dgx-h100?nodes=4");
  Engine e(c, AllocationState(c));
  ASSERT_TRUE(e.decide_one(place_command(R"({"job":"keep","gpus":8})"), nullptr));
  const std::string before = e.jobs_json();
  std::vector<Command> batch = {place_command(R"({"job":"a","gpus":4})"), place_command(R"({"job":"b","gpus":4})")};
  Command release;
  release.kind = Command::Kind::kRelease;
  release.job_id = "keep";
  batch.push_back(release);
  std::size_t seen = 0;
  auto results = e.decide(batch, [&](std::span<const Mutation> d) -> Result<void> {
    seen = d.size();
    return make_error(ErrorCode::kUnavailable, "store down");
  });
  EXPECT_EQ(seen, 3u);
  for (const auto& r : results) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  }
  EXPECT_EQ(e.jobs_json(), before);
  EXPECT_EQ(e.free_gpus(), 24);
  EXPECT_TRUE(e.read([](const AllocationState& s) { return s.check_invariants().has_value(); }));
}

TEST(Engine, AFailedCommitLeavesTheJobOrderAsItWas) {
  // Undoing a release puts the job back where it was in the job order, not at the end.
  Cluster c = preset("dgx-h100?nodes=4");
  Engine e(c, AllocationState(c));
  for (const char* id : {"a", "b", "c"})
    ASSERT_TRUE(e.decide_one(place_command(fmt::format(R"({{"job":"{}","gpus":8}})", id).c_str()), nullptr));
  const std::string before = e.jobs_json();
  Command release;
  release.kind = Command::Kind::kRelease;
  release.job_id = "a";
  std::vector<Command> batch = {release, place_command(R"({"job":"d","gpus":8})")};
  auto results = e.decide(batch, [](std::span<const Mutation>) -> Result<void> {
    return make_error(ErrorCode::kIo, "disk full");
  });
  for (const auto& r : results) ASSERT_FALSE(r);
  EXPECT_EQ(e.jobs_json(), before);
  EXPECT_EQ(e.read([](const AllocationState& s) { return s.job_ids(); }), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(e.read([](const AllocationState& s) { return s.check_invariants().has_value(); }));
}

TEST(Engine, ApplyIsAllOrNothing) {
  Cluster c = preset("dgx-h100?nodes=2");
  Engine e(c, AllocationState(c));
  const GpuId g0 = c.node_gpu(NodeId(0), 0), g1 = c.node_gpu(NodeId(0), 1);
  std::vector<Mutation> ok = {{.kind = Mutation::Kind::kPlace, .job_id = "x", .gpus_by_rank = {g0}, .answer_json = R"({"job":"x"})"},
                                 {.kind = Mutation::Kind::kPlace, .job_id = "y", .gpus_by_rank = {g1}, .answer_json = R"({"job":"y"})"}};
  ASSERT_TRUE(e.apply(ok));
  const std::string before = e.jobs_json();
  // Releasing x then placing z on a GPU y holds fails at the second change: x comes back first.
  std::vector<Mutation> clash = {{.kind = Mutation::Kind::kRelease, .job_id = "x"},
                                    {.kind = Mutation::Kind::kPlace, .job_id = "z", .gpus_by_rank = {g1}, .answer_json = R"({"job":"z"})"}};
  auto r = e.apply(clash);
  ASSERT_FALSE(r);
  EXPECT_EQ(e.jobs_json(), before);
  EXPECT_EQ(before, R"({"jobs":[{"job":"x"},{"job":"y"}]})");
  EXPECT_FALSE(e.apply(std::vector<Mutation>{{.kind = Mutation::Kind::kRelease, .job_id = "nope"}}));
  EXPECT_EQ(e.job_count(), 2u);
}

TEST(Engine, DecisionsInABatchSeeEachOtherAndDryRunsHoldNothing) {
  Cluster c = preset("dgx-h100?nodes=2");
  Engine e(c, AllocationState(c));
  Command dry = place_command(R"({"job":"d","gpus":16})");
  dry.dry_run = true;
  std::vector<Command> batch = {dry, place_command(R"({"job":"a","gpus":16})"),
                                place_command(R"({"job":"b","gpus":1})")};
  std::vector<Mutation> committed;
  auto results = e.decide(batch, [&](std::span<const Mutation> d) -> Result<void> {
    committed.assign(d.begin(), d.end());
    return {};
  });
  ASSERT_TRUE(results[0]);
  ASSERT_TRUE(results[1]);
  ASSERT_FALSE(results[2]);  // a took every GPU
  EXPECT_EQ(results[2].error().code, ErrorCode::kInfeasible);
  // The commit gets the log record the engine applied: what a store persists.
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].kind, Mutation::Kind::kPlace);
  EXPECT_EQ(committed[0].job_id, "a");
  EXPECT_EQ(committed[0].gpus_by_rank, results[1]->gpus_by_rank);
  EXPECT_EQ(committed[0].answer_json, results[1]->answer_json);
  EXPECT_EQ(committed[0].request_json, results[1]->request_json);
  EXPECT_FALSE(e.job_json("d"));
  ASSERT_TRUE(e.job_json("a"));
  EXPECT_EQ(*e.job_json("a"), results[1]->answer_json);
}

// Preemption's question: would the job fit once these jobs are gone? A dry run answers it
// and nothing is released; a real placement cannot assume anything.
TEST(Engine, DryRunsMayAssumeJobsReleased) {
  Cluster c = preset("dgx-h100?nodes=2");
  Engine e(c, AllocationState(c));
  ASSERT_TRUE(e.decide_one(place_command(R"({"job":"a","gpus":8})"), nullptr));
  ASSERT_TRUE(e.decide_one(place_command(R"({"job":"b","gpus":8})"), nullptr));
  Command big = place_command(R"({"job":"big","gpus":16})");
  big.dry_run = true;
  EXPECT_EQ(e.decide_one(big, nullptr).error().code, ErrorCode::kInfeasible);
  big.assume_released = {"a"};
  EXPECT_EQ(e.decide_one(big, nullptr).error().code, ErrorCode::kInfeasible);
  big.assume_released = {"a", "b", "no-such-job"};
  auto fits = e.decide_one(big, nullptr);
  ASSERT_TRUE(fits) << fits.error().message;
  EXPECT_EQ(fits->gpus_by_rank.size(), 16u);
  EXPECT_TRUE(e.job_json("a"));
  EXPECT_TRUE(e.job_json("b"));
  EXPECT_EQ(e.free_gpus(), 0);
  big.dry_run = false;
  EXPECT_EQ(e.decide_one(big, nullptr).error().code, ErrorCode::kInvalidArgument);
}

TEST(Engine, ReadersSeeConsistentStateWhileWritersDecide) {
  Cluster c = preset("dgx-h100?nodes=16");
  Engine e(c, AllocationState(c));
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!done) {
      bool ok = e.read([](const AllocationState& s) { return s.check_invariants().has_value(); });
      bad += !ok;
      auto jobs = nlohmann::json::parse(e.jobs_json());
      bad += !jobs["jobs"].is_array();
    }
  });
  std::atomic<std::size_t> held{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string id = fmt::format("w{}-{}", t, i);
        Command p;
        p.kind = Command::Kind::kPlace;
        p.place.job.job_id = id;
        p.place.job.gpus = 1 + (i % 8);
        p.place.job.gpus = 1 + (i % 4);
        if (!e.decide_one(p, nullptr)) continue;
        Command r;
        r.kind = Command::Kind::kRelease;
        r.job_id = id;
        if (i % 2 == 0 || !e.decide_one(r, nullptr)) ++held;
      }
    });
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(e.job_count(), held.load());
  EXPECT_GT(held.load(), 0u);
}

}  // namespace
}  // namespace toposched
