// Node availability in the engine: marks by source exclude a node from every placement with a
// policy (dry runs, preemption what-ifs and masked requests included), jobs already there keep
// their GPUs and are reported, marks go through apply() like jobs (idempotent, undone by a
// failed commit, replaced by a replica's reload), and bad changes are refused clearly.
#include <optional>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "placement/engine.h"
#include "support/preset_cluster.h"

namespace toposched {
namespace {

using toposched::testing::preset;

Command place(const char* json) {
  Command c;
  c.kind = Command::Kind::kPlace;
  auto r = place_request_from_json(nlohmann::json::parse(json));
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  if (r) c.place = *r;
  return c;
}

Command availability(std::string node, bool available, std::string reason = {}, std::string source = "api") {
  Command c;
  c.kind = Command::Kind::kSetNodeAvailability;
  c.availability = {std::move(node), std::move(source), available, std::move(reason)};
  return c;
}

// The nodes a decision's GPUs are on.
std::set<std::string> nodes_of(const Cluster& c, const Decision& d) {
  std::set<std::string> out;
  for (GpuId g : d.gpus_by_rank) out.insert(c.node_name(c.gpu_node(g)));
  return out;
}

Result<Decision> decide(Engine& e, const Command& c) { return e.decide_one(c, CommitFn{}); }

// The error code of a refused decision; nullopt when it was decided.
std::optional<ErrorCode> refusal(const Result<Decision>& r) {
  return r ? std::nullopt : std::optional<ErrorCode>(r.error().code);
}

class Availability : public ::testing::Test {
 protected:
  Cluster c = preset("dgx-h100?nodes=2");
  Engine e{c, AllocationState(c)};
  std::string n1 = c.node_name(NodeId(0)), n2 = c.node_name(NodeId(1));
};

TEST_F(Availability, AnUnavailableNodeTakesNoNewJobFromAnyPlacementWithAPolicy) {
  ASSERT_TRUE(decide(e, availability(n1, false, "maintenance")));
  auto one = decide(e, place(R"({"job":"a","gpus":8})"));
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(nodes_of(c, *one), std::set<std::string>{n2});
  // The second node is full now; the first is free but unavailable: 16 GPUs do not fit, and
  // the answer says unavailable nodes were excluded.
  Command dry = place(R"({"gpus":8})");
  dry.dry_run = true;
  auto refused = decide(e, dry);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInfeasible);
  EXPECT_NE(refused.error().message.find("1 unavailable node(s) excluded"), std::string::npos)
      << refused.error().message;
  // A preemption what-if (a dry run assuming "a" gone) lands on n2 again, never on n1.
  dry.assume_released = {"a"};
  auto what_if = decide(e, dry);
  ASSERT_TRUE(what_if) << what_if.error().message;
  EXPECT_EQ(nodes_of(c, *what_if), std::set<std::string>{n2});
  // A request's own mask is combined with availability, not replaced by it.
  Command masked = place(R"({"gpus":1})");
  masked.place.allowed = {1, 0};  // only n1, which is unavailable
  EXPECT_EQ(refusal(decide(e, masked)), ErrorCode::kInfeasible);
}

TEST_F(Availability, AJobHeldWhereAnotherSchedulerPutItIsNotRefused) {
  ASSERT_TRUE(decide(e, availability(n1, false, "DRAIN", "slurm")));
  Command held = place(R"({"job":"slurm-job:7","gpus":2})");
  held.hold_gpus = {c.node_gpu(NodeId(0), 0), c.node_gpu(NodeId(0), 1)};
  auto d = decide(e, held);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(nodes_of(c, *d), std::set<std::string>{n1});
}

TEST_F(Availability, EachSourceSetsAndLiftsOnlyItsOwnMark) {
  ASSERT_TRUE(decide(e, availability(n1, false, "cordoned", "k8s")));
  ASSERT_TRUE(decide(e, availability(n1, false, "maintenance")));
  auto node = nlohmann::json::parse(*e.node_json(n1));
  EXPECT_FALSE(node["available"]);
  ASSERT_EQ(node["unavailable"].size(), 2u);
  EXPECT_EQ(node["unavailable"][0]["source"], "api");
  EXPECT_EQ(node["unavailable"][1]["reason"], "cordoned");
  ASSERT_TRUE(decide(e, availability(n1, true, {}, "k8s")));
  EXPECT_FALSE(nlohmann::json::parse(*e.node_json(n1))["available"]) << "the operator's mark must stay";
  ASSERT_TRUE(decide(e, availability(n1, true)));
  EXPECT_TRUE(nlohmann::json::parse(*e.node_json(n1))["available"]);
  EXPECT_EQ(e.unavailable_summary().nodes, 0);
}

TEST_F(Availability, TheCallerThatJudgesASourceItselfIgnoresOnlyThatSourcesMarks) {
  ASSERT_TRUE(decide(e, availability(n1, false, "cordoned", "k8s")));
  ASSERT_TRUE(decide(e, availability(n2, false, "maintenance")));
  Command extender = place(R"({"gpus":16})");
  extender.dry_run = true;
  extender.caller_judges_source = "k8s";
  EXPECT_FALSE(decide(e, extender)) << "n2's operator mark still counts";
  ASSERT_TRUE(decide(e, availability(n2, true)));
  auto d = decide(e, extender);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(nodes_of(c, *d), (std::set<std::string>{n1, n2}));
  extender.caller_judges_source.clear();
  EXPECT_FALSE(decide(e, extender)) << "without the caller's judgement the k8s mark counts";
}

TEST_F(Availability, SettingWhatIsAlreadySetCommitsNothingAndKeepsTheTime) {
  int commits = 0;
  CommitFn count = [&](std::span<const Mutation>) -> Result<void> {
    ++commits;
    return {};
  };
  auto first = e.decide_one(availability(n1, false, "NotReady", "k8s"), count);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->changed);
  EXPECT_GT(first->since_unix_ms, 0);
  auto again = e.decide_one(availability(n1, false, "NotReady", "k8s"), count);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(commits, 1);
  // A new reason is a change, but the node has been unavailable since the first mark.
  auto reworded = e.decide_one(availability(n1, false, "NotReady, cordoned", "k8s"), count);
  ASSERT_TRUE(reworded);
  EXPECT_TRUE(reworded->changed);
  EXPECT_EQ(reworded->since_unix_ms, first->since_unix_ms);
  EXPECT_EQ(commits, 2);
  // Lifting a mark that is not there is no change either.
  auto lift_none = e.decide_one(availability(n2, true, {}, "k8s"), count);
  ASSERT_TRUE(lift_none);
  EXPECT_FALSE(lift_none->changed);
  EXPECT_EQ(commits, 2);
}

TEST_F(Availability, JobsOnANodeThatBecomesUnavailableKeepTheirGpusAndAreReported) {
  ASSERT_TRUE(decide(e, place(R"({"job":"on-both","gpus":16})")));
  const std::string job_before = *e.job_json("on-both");
  ASSERT_TRUE(decide(e, availability(n2, false, "NotReady", "k8s")));
  EXPECT_EQ(e.free_gpus(), 0) << "an unavailable node's jobs keep their GPUs";
  auto job = nlohmann::json::parse(*e.job_json("on-both"));
  ASSERT_TRUE(job.contains("unavailable_nodes"));
  EXPECT_EQ(job["unavailable_nodes"], nlohmann::json::parse(R"([{"node":")" + n2 + R"(","reason":"k8s: NotReady"}])"));
  EXPECT_EQ(nlohmann::json::parse(e.jobs_json())["jobs"][0], job);
  const UnavailableSummary s = e.unavailable_summary();
  EXPECT_EQ(s.nodes, 1);
  EXPECT_EQ(s.jobs_on_them, 1);
  auto node = nlohmann::json::parse(*e.node_json(n2));
  EXPECT_EQ(node["jobs"], nlohmann::json::parse(R"(["on-both"])"));
  EXPECT_EQ(node["free_gpus"], 0);
  // Healed: the job's JSON is again exactly what its client received.
  ASSERT_TRUE(decide(e, availability(n2, true, {}, "k8s")));
  EXPECT_EQ(*e.job_json("on-both"), job_before);
}

TEST_F(Availability, AFailedCommitUndoesTheMarkLikeAnyOtherChange) {
  ASSERT_TRUE(decide(e, availability(n1, false, "cordoned", "k8s")));
  const std::string before = e.nodes_json();
  CommitFn fail = [](std::span<const Mutation>) -> Result<void> { return make_error(ErrorCode::kIo, "injected"); };
  std::vector<Command> batch = {availability(n1, false, "NotReady", "k8s"), availability(n2, false, "maintenance"),
                                place(R"({"job":"x","gpus":8})")};
  auto results = e.decide(batch, fail);
  for (const auto& r : results) EXPECT_FALSE(r);
  EXPECT_EQ(e.nodes_json(), before);
  EXPECT_EQ(e.job_count(), 0u);
}

TEST_F(Availability, AReplicaReloadReplacesTheMarks) {
  ASSERT_TRUE(decide(e, availability(n1, false, "cordoned", "k8s")));
  std::vector<Mutation> marks = {{.kind = Mutation::Kind::kMarkNode, .node = NodeId(1), .mark = NodeMark{"slurm", "DRAIN", 42}}};
  ASSERT_TRUE(e.replace(marks));
  auto nodes = nlohmann::json::parse(e.nodes_json())["nodes"];
  EXPECT_TRUE(nodes[0]["available"]);
  EXPECT_EQ(nodes[1]["unavailable"], nlohmann::json::parse(R"([{"source":"slurm","reason":"DRAIN","since_unix_ms":42}])"));
}

TEST_F(Availability, BadChangesAreRefusedNamingWhatIsWrong) {
  auto unknown = decide(e, availability("no-such-node", false, "x"));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("no-such-node"), std::string::npos);
  EXPECT_EQ(refusal(decide(e, availability(n1, false, ""))), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refusal(decide(e, availability(n1, false, "x", "K8S"))), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refusal(decide(e, availability(n1, true, "why"))), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.unavailable_summary().nodes, 0);
}

TEST(NodeAvailabilityJson, ReadsTheBodyStrictly) {
  auto ok = node_availability_from_json("n", nlohmann::json::parse(R"({"available":false,"reason":"fan failure"})"));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->source, "api");
  EXPECT_FALSE(ok->available);
  EXPECT_EQ(ok->reason, "fan failure");
  struct Case {
    const char* body;
    const char* message_part;
  } cases[] = {
      {R"([])", "expected a JSON object"},
      {R"({})", "'available' (true or false) is required"},
      {R"({"available":"no"})", "'available' must be true or false, found string"},
      {R"({"available":false})", "needs a 'reason'"},
      {R"({"available":true,"reason":"x"})", "'reason' is only for"},
      {R"({"available":false,"reason":7})", "'reason' must be a string, found number"},
      {R"({"available":false,"reason":"a\nb"})", "control character"},
      {R"({"available":false,"reason":"x","source":"Bad Source"})", "'source' must be 1-63 characters"},
      {R"({"available":false,"reason":"x","colour":"red"})", "unknown key 'colour'"},
  };
  for (const Case& k : cases) {
    auto r = node_availability_from_json("n", nlohmann::json::parse(k.body));
    ASSERT_FALSE(r) << k.body;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << k.body;
    EXPECT_NE(r.error().message.find(k.message_part), std::string::npos) << k.body << ": " << r.error().message;
  }
  std::string long_reason(kMaxReasonBytes + 1, 'x');
  EXPECT_FALSE(node_availability_from_json("n", {{"available", false}, {"reason", long_reason}}));
}

}  // namespace
}  // namespace toposched
