// The Philly job log's fast path (read_philly_fast, sim/traces/other_traces.h) against the
// exact path (parse_json_document and nlohmann): on the repository's log, on logs it takes,
// on logs it must leave to the exact path (JSON nlohmann reads otherwise or refuses, every
// row error), on random logs and on every byte of a log mutated. Where it takes a log, the
// trace is the exact path's (jobs, order, ignored rows, or finalize_trace's error); and
// read_philly always answers as the exact path does, errors at the same file:line:col.
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim/traces/other_traces.h"
#include "support/fast_path_check.h"
#include "support/trace_signature.h"
#include "topology/file_io.h"

namespace toposched::sim {
namespace {

using testing::trace_signature;

// Whether the fast path took `text`; fails the test where it answers otherwise than the
// exact path, or where read_philly does.
bool check(std::string_view text) {
  const auto exact = read_philly_exact(text, "log.json");
  const auto fast = read_philly_fast(text, "log.json");
  if (fast) {
    EXPECT_EQ(trace_signature(*fast), trace_signature(exact)) << text;
  }
  EXPECT_EQ(trace_signature(read_philly(text, "log.json")), trace_signature(exact)) << text;
  return fast.has_value();
}

std::string job(std::string_view id, std::string_view attempts, std::string_view submitted = "2017-10-03 02:58:00") {
  return fmt::format(R"({{"status": "Pass", "vc": "vc-a", "jobid": "{}", "attempts": [{}], "submitted_time": "{}", "user": "u"}})",
                     id, attempts, submitted);
}

std::string attempt(std::string_view start, std::string_view end, int gpus) {
  std::string list;
  for (int g = 0; g < gpus; ++g) list += fmt::format("{}\"gpu{}\"", g ? ", " : "", g);
  return fmt::format(R"({{"start_time": "{}", "end_time": "{}", "detail": [{{"ip": "m1", "gpus": [{}]}}]}})", start, end, list);
}

const std::string kAttempt = attempt("2017-10-03 02:58:08", "2017-10-03 04:58:08", 2);

TEST(PhillyFast, TheRepositorysLogReadsAsBefore) {
  auto text = read_text_file(std::string(TOPOSCHED_SOURCE_DIR) + "/tests/data/traces/philly/cluster_job_log");
  ASSERT_TRUE(text);
  EXPECT_TRUE(check(*text));
  const auto fast = read_philly_fast(*text, "log.json");
  ASSERT_TRUE(fast && *fast);
  EXPECT_EQ((*fast)->jobs.size(), 2u);
  EXPECT_EQ((*fast)->ignored_rows, 2u);
}

TEST(PhillyFast, PlainLogsTakeTheFastPath) {
  const std::vector<std::string> taken = {
      "[]",
      " [ ]\n",
      "[" + job("a", kAttempt) + "]",
      // numbers, literals and nesting in fields the reader does not use
      R"([{"jobid": "a", "x": [1, -0.5, 2e3, true, false, null, {"y": {}}], "submitted_time": "2017-10-03 02:58:00", "attempts": []}])",
      // attempts that never ended, times that are not strings or not dates, odd detail entries
      "[" + job("a", R"({"start_time": "2017-10-03 02:58:08", "end_time": null, "detail": []})") + "]",
      "[" + job("a", R"({"start_time": 5, "end_time": "soon", "detail": [{"ip": "m1", "gpus": ["g", 1, null]}]})") + "]",
      "[" + job("a", R"({"start_time": "2017-10-03 02:58:08", "end_time": "2017-10-03 03:58:08", "detail": [7, {"gpus": "all"}, {"gpus": [[], {}]}]})") + "]",
      "[" + job("a", R"({"detail": {"gpus": ["g"]}})") + "]",
      // two attempts: the larger one's GPUs, first start to last end
      "[" + job("a", kAttempt + ", " + attempt("2017-10-03 05:00:00", "2017-10-03 06:00:00", 4)) + "]",
      // an id twice: finalize_trace's error, the same from both paths
      "[" + job("a", kAttempt) + ",\n" + job("a", kAttempt) + "]",
      // keys in another order
      R"([{"attempts": [], "submitted_time": "2017-10-03 02:58:00", "jobid": "b"}])",
  };
  for (const auto& t : taken) EXPECT_TRUE(check(t)) << t;
}

TEST(PhillyFast, WhatTheExactPathReportsOrReadsOtherwiseIsLeftToIt) {
  const std::vector<std::string> declined = {
      "", "{}", "\xef\xbb\xbf[]", "[] []", "[1]", "[\"a\"]", "[{}]",
      // row errors: no id, an empty or non-string id, a bad or missing submit time, no attempts
      R"([{"submitted_time": "2017-10-03 02:58:00", "attempts": []}])",
      R"([{"jobid": "", "submitted_time": "2017-10-03 02:58:00", "attempts": []}])",
      R"([{"jobid": 7, "submitted_time": "2017-10-03 02:58:00", "attempts": []}])",
      R"([{"jobid": "a", "submitted_time": "yesterday", "attempts": []}])",
      R"([{"jobid": "a", "attempts": []}])",
      R"([{"jobid": "a", "submitted_time": "2017-10-03 02:58:00", "attempts": {}}])",
      R"([{"jobid": "a", "submitted_time": "2017-10-03 02:58:00"}])",
      "[" + job("a", "3") + "]",
      "[" + job("a", attempt("2017-10-03 04:58:08", "2017-10-03 02:58:08", 1)) + "]",  // ends before it starts
      // JSON nlohmann refuses, or that the fast path does not read
      R"([{"jobid": "a", "jobid": "b", "submitted_time": "2017-10-03 02:58:00", "attempts": []}])",
      R"([{"jobid": "a", "submitted_time": "2017-10-03 02:58:00", "attempts": [], "x": 01}])",
      R"([{"jobid": "a", "submitted_time": "2017-10-03 02:58:00", "attempts": [], "x": 1e400}])",
      R"([{"jobid": "a", "submitted_time": "2017-10-03 02:58:00", "attempts": [], "x": tru}])",
      R"([{"jobid": "a", "submitted_time": "2017-10-03 02:58:00", "attempts": [], "x": nul}])",
      R"([{"jobid": "\u0061", "submitted_time": "2017-10-03 02:58:00", "attempts": []}])",
      "[" + job("a\tb", kAttempt) + "]",
      "[" + job("a", kAttempt) + ",]",
      "[" + job("a", kAttempt) + "\r]",
      "[" + job("a", kAttempt) + "] x",
      "[" + std::string(120, '[') + std::string(120, ']') + "]",
      // the same in values the reader walks past, at every level it reads
      "[" + job("a", R"({"start_time": "2017-10-03 02:58:08", "x": 01})") + "]",
      "[" + job("a", R"({"start_time": 01})") + "]",
      "[" + job("a", R"({"detail": {"a": 1, "a": 2}})") + "]",
      "[" + job("a", R"({"detail": [{"ip": tru}]})") + "]",
      "[" + job("a", R"({"detail": [nul]})") + "]",
      "[" + job("a", R"({"detail": [{"gpus": [1e400]}]})") + "]",
      "[" + job("a", R"({"detail": [{"gpus": "a", "gpus": "b"}]})") + "]",
  };
  for (const auto& t : declined) EXPECT_FALSE(check(t)) << t;
}

TEST(PhillyFast, RandomLogs) {
  std::mt19937 rng(34);
  int taken = 0;
  for (int round = 0; round < 300; ++round) {
    std::string text = "[";
    const int jobs = static_cast<int>(rng() % 6);
    for (int j = 0; j < jobs; ++j) {
      std::string attempts;
      const int n = static_cast<int>(rng() % 3);
      for (int a = 0; a < n; ++a) {
        const int start = static_cast<int>(rng() % 50), end = start + static_cast<int>(rng() % 50) - 5;
        attempts += fmt::format("{}{}", a ? ", " : "",
                                attempt(fmt::format("2017-10-03 03:{:02d}:00", start),
                                        end < 60 ? fmt::format("2017-10-03 03:{:02d}:00", std::max(end, 0)) : "None",
                                        static_cast<int>(rng() % 4)));
      }
      text += fmt::format("{}{}\n", j ? ",\n" : "", job(fmt::format("job-{}", rng() % 8), attempts,
                                                          fmt::format("2017-10-03 02:{:02d}:00", rng() % 60)));
    }
    text += "]\n";
    taken += check(text) ? 1 : 0;
  }
  EXPECT_GT(taken, 100);
}

TEST(PhillyFast, EveryByteMutated) {
  const std::string base = "[" + job("a", kAttempt + ", " + attempt("2017-10-03 05:00:00", "2017-10-03 06:00:00", 3)) + ",\n" +
                           job("b", R"({"start_time": null, "end_time": 1.5e2, "x": [2.5, false], "detail": [{"gpus": [true]}, 3.5]})") + "]";
  const int taken = testing::taken_under_byte_mutations(base, [](const std::string& text) { return check(text); });
  EXPECT_GT(taken, 0);
}

}  // namespace
}  // namespace toposched::sim
