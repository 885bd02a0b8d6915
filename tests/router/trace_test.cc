// The Mooncake trace reader: rows, positioned errors, skipping, and the trace's own cache
// statistics on the bundled conversation trace (issue 15, acceptance 1).
#include <gtest/gtest.h>

#include "router/request_trace.h"

namespace toposched::router {
namespace {

const std::string kTrace = std::string(TOPOSCHED_TEST_DATA) + "/traces/mooncake/conversation_trace.jsonl";

TEST(MooncakeTrace, ReadsRowsInArrivalOrder) {
  auto t = parse_mooncake_trace(
      "{\"timestamp\": 1500, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [0, 1]}\n"
      "\n"
      "{\"timestamp\": 1000, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [0]}\n",
      "t.jsonl");
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->requests.size(), 2u);
  EXPECT_DOUBLE_EQ(t->requests[0].arrival_s, 1.0);
  EXPECT_EQ(t->requests[0].input_tokens, 512);
  EXPECT_EQ(t->requests[1].output_tokens, 7);
  EXPECT_EQ(t->requests[1].block_ids, (std::vector<std::uint64_t>{0, 1}));
}

TEST(MooncakeTrace, MalformedLinesGiveFileLineColumn) {
  const std::string good = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [4]}\n";
  struct Case {
    std::string line;
    std::string expect;
  } cases[] = {
      {"{\"timestamp\": 0, \"input_length\": 10,", "t.jsonl:2:"},
      {"{\"input_length\": 10, \"output_length\": 2, \"hash_ids\": [4]}", "t.jsonl:2:1: expected key \"timestamp\""},
      {"{\"timestamp\": 0, \"input_length\": \"ten\", \"output_length\": 2, \"hash_ids\": [4]}", "\"input_length\": expected an integer"},
      {"{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 2, \"hash_ids\": [4]}", "expected 2 hash_ids for input_length 1000"},
      {"{\"timestamp\": -5, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [4]}", "expected milliseconds >= 0"},
      {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [4]}", "expected an integer >= 1, found 0"},
      {"[1, 2]", "expected a JSON object"},
      {"{\"timestamp\": 0, \"timestamp\": 1, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [4]}",
       "t.jsonl:2:18: expected one JSON object per line: key 'timestamp' repeated, first at line 2"},
  };
  for (const Case& c : cases) {
    auto t = parse_mooncake_trace(good + c.line + "\n", "t.jsonl");
    ASSERT_FALSE(t) << c.line;
    EXPECT_EQ(t.error().code, ErrorCode::kParse);
    EXPECT_NE(t.error().to_string().find(c.expect), std::string::npos) << t.error().to_string();
    EXPECT_NE(t.error().to_string().find("t.jsonl:2:"), std::string::npos) << t.error().to_string();
  }
}

TEST(MooncakeTrace, SkipsBadRowsWhenAsked) {
  TraceReadOptions o;
  o.skip_bad_rows = true;
  auto t = parse_mooncake_trace("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [4]}\nnot json\n{}\n", "t.jsonl", o);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->requests.size(), 1u);
  EXPECT_EQ(t->skipped_rows, 2u);
  EXPECT_FALSE(parse_mooncake_trace("", "empty.jsonl"));
}

TEST(MooncakeTrace, StatsCountPrefixHitsAndReuse) {
  // Request 2 shares block 0 only; request 3 repeats request 1 entirely (input 1000 tokens:
  // 2 blocks, the second partial) and its prefix hit is capped at its input length.
  auto t = parse_mooncake_trace(
      "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 2, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 1, \"input_length\": 1024, \"output_length\": 2, \"hash_ids\": [0, 2]}\n"
      "{\"timestamp\": 2, \"input_length\": 1000, \"output_length\": 2, \"hash_ids\": [0, 1]}\n",
      "t.jsonl");
  ASSERT_TRUE(t);
  TraceStats s = trace_stats(*t);
  EXPECT_EQ(s.blocks, 6u);
  EXPECT_EQ(s.unique_blocks, 3u);
  EXPECT_DOUBLE_EQ(s.block_reuse, 3.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.token_hit_upper_bound, (512.0 + 1000.0) / 3024.0);
}

TEST(MooncakeTrace, BundledConversationTraceFigures) {
  auto t = read_mooncake_trace(kTrace);
  ASSERT_TRUE(t) << t.error().to_string();
  TraceStats s = trace_stats(*t);
  EXPECT_EQ(s.requests, 12031u);
  EXPECT_EQ(s.blocks, 288500u);
  EXPECT_EQ(s.unique_blocks, 182790u);
  EXPECT_NEAR(s.block_reuse, 0.3664, 5e-5);             // 36.64 %
  EXPECT_NEAR(s.token_hit_upper_bound, 0.3736, 5e-5);   // 37.36 %
}

}  // namespace
}  // namespace toposched::router
