// Trace readers: each format on real or hand-written rows in its published layout, the
// error positions of malformed rows, --skip-bad-rows, and truncated / corrupted copies of
// every fixture (a clean error or a valid trace, never a crash: run under ASan).
#include <gtest/gtest.h>

#include <string>

#include "sim/traces/alibaba_v2023.h"
#include "sim/traces/csv.h"
#include "sim/traces/native_csv.h"
#include "sim/traces/other_traces.h"
#include "sim/traces/trace_source.h"
#include "topology/file_io.h"

namespace toposched::sim {
namespace {

std::string data(const std::string& rel) { return std::string(TOPOSCHED_TEST_DATA) + "/traces/" + rel; }
std::string slurp(const std::string& rel) {
  auto t = read_text_file(data(rel));
  EXPECT_TRUE(t.has_value()) << rel;
  return t ? *t : std::string();
}

TEST(NativeCsv, ReadsEveryColumnAndQuotedIds) {
  auto t = load_trace(data("native/small.csv"));
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->format, "native");
  ASSERT_EQ(t->jobs.size(), 5u);
  const SimJob& a = t->jobs[0];
  EXPECT_EQ(a.id, "train-1");
  EXPECT_EQ(a.gpus, 64);
  EXPECT_EQ(a.tp, 8);
  EXPECT_EQ(a.pp, 2);
  EXPECT_EQ(a.dp, 4);
  EXPECT_EQ(a.kind, "llm-dense");
  EXPECT_EQ(a.priority, 1);
  EXPECT_DOUBLE_EQ(a.estimate_s, 9000);
  EXPECT_EQ(t->jobs[1].ep, 4);
  EXPECT_EQ(t->jobs[3].id, "vision,1");
  EXPECT_LT(t->jobs[4].estimate_s, 0);  // none given
  EXPECT_EQ(t->jobs[4].tp, 0);
}

TEST(NativeCsv, ErrorsPointAtLineAndColumn) {
  auto bad_number = read_native_csv("id,submit_s,gpus,duration_s\na,0,4,100\nb,10,four,100\n", "t.csv");
  ASSERT_FALSE(bad_number);
  EXPECT_EQ(bad_number.error().where.line, 3);
  EXPECT_EQ(bad_number.error().where.column, 6);
  EXPECT_NE(bad_number.error().message.find("'four'"), std::string::npos);
  EXPECT_EQ(bad_number.error().to_string().rfind("t.csv:3:6: ", 0), 0u);

  auto missing = read_native_csv("id,submit_s,duration_s\n", "t.csv");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("'gpus'"), std::string::npos);

  auto unknown = read_native_csv("id,submit_s,gpus,duration_s,colour\n", "t.csv");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().where.column, 29);

  auto plan = read_native_csv("id,submit_s,gpus,duration_s,tp,pp,dp\nx,0,16,10,8,1,4\n", "t.csv");
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("tp x pp x dp = 32"), std::string::npos);

  auto fields = read_native_csv("id,submit_s,gpus,duration_s\nx,0,1\n", "t.csv");
  ASSERT_FALSE(fields);
  EXPECT_EQ(fields.error().where.line, 2);

  auto quote = read_native_csv("id,submit_s,gpus,duration_s\n\"x,0,1,1\n", "t.csv");
  ASSERT_FALSE(quote);
  EXPECT_NE(quote.error().message.find("unterminated"), std::string::npos);

  auto dup = read_native_csv("id,submit_s,gpus,duration_s\nx,0,1,1\nx,1,1,1\n", "t.csv");
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("twice"), std::string::npos);

  auto zero = read_native_csv("id,submit_s,gpus,duration_s\nx,0,0,1\n", "t.csv");
  ASSERT_FALSE(zero);
}

TEST(NativeCsv, SkipBadRowsCountsThem) {
  std::string text = "id,submit_s,gpus,duration_s\na,0,4,100\nb,x,4,100\nc,5,-1,100\nd,7,2,50\n";
  TraceReadOptions o;
  o.skip_bad_rows = true;
  auto t = read_native_csv(text, "t.csv", o);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->skipped_rows, 2u);
  EXPECT_NE(t->first_skip_reason.find("t.csv:3:"), std::string::npos);
}

TEST(NativeCsv, SortsBySubmitTimeStably) {
  auto t = read_native_csv("id,submit_s,gpus,duration_s\nlate,50,1,1\nearly,10,1,1\nalso-50,50,1,1\n", "t.csv");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->jobs[0].id, "early");
  EXPECT_EQ(t->jobs[1].id, "late");
  EXPECT_EQ(t->jobs[2].id, "also-50");
}

TEST(NativeCsv, WriteReadRoundTrip) {
  auto t = load_trace(data("native/small.csv"));
  ASSERT_TRUE(t);
  std::string text = write_native_csv(*t);
  auto back = read_native_csv(text, "rt.csv");
  ASSERT_TRUE(back) << back.error().to_string();
  ASSERT_EQ(back->jobs.size(), t->jobs.size());
  for (std::size_t i = 0; i < t->jobs.size(); ++i) {
    EXPECT_EQ(back->jobs[i].id, t->jobs[i].id);
    EXPECT_EQ(back->jobs[i].gpus, t->jobs[i].gpus);
    EXPECT_EQ(back->jobs[i].tp, t->jobs[i].tp);
    EXPECT_EQ(back->jobs[i].kind, t->jobs[i].kind);
    EXPECT_DOUBLE_EQ(back->jobs[i].duration_s, t->jobs[i].duration_s);
  }
}

TEST(AlibabaV2023, PodListWithTimes) {
  auto t = load_trace(data("alibaba-v2023/openb_pod_list_default_head300.csv"));
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->format, "alibaba-v2023");
  EXPECT_TRUE(t->has_times);
  // 300 pods: 19 without GPUs, and the ones never scheduled or that ran 0 s are ignored.
  EXPECT_EQ(t->jobs.size() + t->ignored_rows, 300u);
  EXPECT_GE(t->ignored_rows, 19u);
  // openb-pod-0000: 1 GPU, LS, created 0, scheduled 0, deleted 12537496.
  const SimJob* first = nullptr;
  for (const auto& j : t->jobs)
    if (j.id == "openb-pod-0000") first = &j;
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->gpus, 1);
  EXPECT_DOUBLE_EQ(first->duration_s, 12537496);
  EXPECT_EQ(first->priority, 2);
  int eight = 0;
  for (const auto& j : t->jobs) eight += j.gpus == 8;
  EXPECT_GE(eight, 1);
}

TEST(AlibabaV2023, PodListWithoutTimes) {
  auto t = load_trace(data("alibaba-v2023/openb_pod_list_multigpu50.csv"));
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_FALSE(t->has_times);
  EXPECT_EQ(t->jobs.size() + t->ignored_rows, 9061u);
  long gpus = 0, multi = 0;
  for (const auto& j : t->jobs) {
    gpus += j.gpus;
    if (j.gpus > 1) multi += j.gpus;
  }
  // "multigpu50": about half of the GPUs requested come from multi-GPU pods.
  EXPECT_GT(static_cast<double>(multi) / static_cast<double>(gpus), 0.4);
}

TEST(AlibabaV2023, NodeListBuildsTheCluster) {
  auto c = load_sim_cluster(data("alibaba-v2023/openb_node_list_gpu_node.csv"));
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->node_count(), 1213u);
  EXPECT_EQ(c->gpu_count(), 6212u);
  auto n = c->find_node("openb-node-1211");
  ASSERT_TRUE(n);
  EXPECT_EQ(c->node_type(*n).gpu_model, "G2");
  EXPECT_EQ(c->node_gpu_count(*n), 8);
  // G2 8-GPU nodes have NVLink; 2-GPU T4 nodes PCIe.
  EXPECT_EQ(c->level_name(c->path(c->node_gpu(*n, 0), c->node_gpu(*n, 1))), "nvlink");
  auto t4 = c->find_node("openb-node-1210");
  ASSERT_TRUE(t4);
  EXPECT_NE(c->level_name(c->path(c->node_gpu(*t4, 0), c->node_gpu(*t4, 1))), "nvlink");
  ASSERT_EQ(c->tiers().size(), 2u);
  EXPECT_EQ(c->tiers()[0].name, "tor");
}

TEST(AlibabaV2023, NodeListErrors) {
  auto bad = read_alibaba_v2023_nodes("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,8,G2\nn2,1,1,eight,G2\n", "nodes.csv");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.line, 3);
  EXPECT_EQ(bad.error().where.column, 8);
  auto dup = read_alibaba_v2023_nodes("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,8,G2\nn1,1,1,8,G2\n", "nodes.csv");
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("twice"), std::string::npos);
  auto empty = read_alibaba_v2023_nodes("sn,cpu_milli,memory_mib,gpu,model\n", "nodes.csv");
  ASSERT_FALSE(empty);
}

TEST(PaiV2020, JobsAggregateTheirTasks) {
  auto t = load_trace(data("pai-v2020"));
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->format, "pai-v2020");
  // job-a1: 2 workers x 1 GPU (+ a CPU-only ps); job-b2: 1 x 0.5 GPU -> 1; job-c3: 4 x 2 GPUs.
  // job-d4 still runs (no end) and job-e5 ran 0 s: both ignored.
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->ignored_rows, 2u);
  EXPECT_EQ(t->jobs[0].id, "job-a1");
  EXPECT_EQ(t->jobs[0].gpus, 2);
  EXPECT_DOUBLE_EQ(t->jobs[0].submit_s, 0);  // shifted: job table start 900 is the earliest submit
  EXPECT_DOUBLE_EQ(t->jobs[0].duration_s, 3600);
  EXPECT_EQ(t->jobs[0].gpu_model, "V100");
  EXPECT_EQ(t->jobs[1].gpus, 1);
  EXPECT_DOUBLE_EQ(t->jobs[1].submit_s, 500);
  EXPECT_EQ(t->jobs[2].gpus, 8);
  EXPECT_DOUBLE_EQ(t->jobs[2].duration_s, 7200);
}

TEST(PaiV2020, MalformedTaskRow) {
  auto bad = read_pai_v2020({"j1,w,1,Terminated,0,10,600,29,100,V100\nj2,w,x,Terminated,0,10,600,29,100,V100\n", "task.csv"}, std::nullopt);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.line, 2);
  EXPECT_EQ(bad.error().where.column, 6);
  TraceReadOptions skip;
  skip.skip_bad_rows = true;
  auto ok = read_pai_v2020({"j1,w,1,Terminated,0,10,600,29,100,V100\nj2,w,x,Terminated,0,10,600,29,100,V100\nshort,row\n", "task.csv"},
                           std::nullopt, skip);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->jobs.size(), 1u);
  EXPECT_EQ(ok->skipped_rows, 2u);
}

TEST(Philly, AttemptsAndGpus) {
  auto t = load_trace(data("philly/cluster_job_log"));
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->format, "philly");
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->ignored_rows, 2u);  // no attempt; an attempt that never ended
  EXPECT_EQ(t->jobs[0].gpus, 8);
  EXPECT_DOUBLE_EQ(t->jobs[0].duration_s, 7200);
  EXPECT_DOUBLE_EQ(t->jobs[0].submit_s, 0);
  EXPECT_EQ(t->jobs[1].gpus, 2);                   // the larger attempt
  EXPECT_DOUBLE_EQ(t->jobs[1].duration_s, 3000);   // 03:10 to 04:00
  EXPECT_DOUBLE_EQ(t->jobs[1].submit_s, 420);
}

TEST(Philly, Errors) {
  auto syntax = read_philly("[\n {\"jobid\": \"a\",\n  \"submitted_time\": }\n]", "log.json");
  ASSERT_FALSE(syntax);
  EXPECT_EQ(syntax.error().where.line, 3);
  auto bad_time = read_philly("[\n{\"jobid\": \"a\", \"submitted_time\": \"yesterday\", \"attempts\": []}\n]", "log.json");
  ASSERT_FALSE(bad_time);
  EXPECT_EQ(bad_time.error().where.line, 2);
  EXPECT_NE(bad_time.error().message.find("yesterday"), std::string::npos);
  auto not_array = read_philly("{}", "log.json");
  ASSERT_FALSE(not_array);
}

TEST(Helios, Rows) {
  auto t = load_trace(data("helios/cluster_log.csv"));
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->format, "helios");
  ASSERT_EQ(t->jobs.size(), 3u);  // job 2 has no GPU, job 4 ran 0 s
  EXPECT_EQ(t->ignored_rows, 2u);
  EXPECT_EQ(t->jobs[0].id, "1");
  EXPECT_EQ(t->jobs[0].gpus, 8);
  EXPECT_DOUBLE_EQ(t->jobs[0].duration_s, 7200);
  EXPECT_EQ(t->jobs[1].gpus, 32);
  EXPECT_DOUBLE_EQ(t->jobs[1].submit_s, 590);
  auto bad = read_helios("job_id,user,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
                         "1,u,8,1,1,COMPLETED,2020-13-01 00:00:00,,,10,0\n", "h.csv");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.line, 2);
  EXPECT_EQ(bad.error().where.column, 21);
}

TEST(TraceSource, DetectsAndRejects) {
  EXPECT_EQ(detect_trace_format("id,submit_s,gpus,duration_s\n", "x.csv"), "native");
  EXPECT_EQ(detect_trace_format("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "x.csv"), "alibaba-v2023");
  EXPECT_EQ(detect_trace_format("job_id,user,gpu_num,cpu_num\n", "x.csv"), "helios");
  EXPECT_EQ(detect_trace_format("  [ {} ]", "x"), "philly");
  EXPECT_EQ(detect_trace_format("a,b,c\n", "x.csv"), "");
  auto unknown = load_trace(data("README.md"));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("--trace-format"), std::string::npos);
  auto missing = load_trace(data("no-such-file.csv"));
  ASSERT_FALSE(missing);
  auto bad_format = load_trace(data("native/small.csv"), "swf");
  ASSERT_FALSE(bad_format);
  EXPECT_EQ(bad_format.error().code, ErrorCode::kInvalidArgument);
}

TEST(Csv, DatetimeParsing) {
  EXPECT_EQ(csv::parse_datetime("1970-01-01 00:00:00"), 0.0);
  EXPECT_EQ(csv::parse_datetime("2020-04-01 00:00:10"), 1585699210.0);
  EXPECT_EQ(csv::parse_datetime("2017-10-03T02:58:08"), 1506999488.0);
  EXPECT_FALSE(csv::parse_datetime("2017-10-03 2:58:08"));
  EXPECT_FALSE(csv::parse_datetime("2017-13-03 02:58:08"));
  EXPECT_FALSE(csv::parse_datetime(""));
}

// Every fixture, truncated at many points and with bytes flipped: a clean error or a valid
// trace, never a crash or a hang.
TEST(TraceFuzz, TruncatedAndCorruptedFixtures) {
  struct Fixture {
    std::string rel;
    std::string format;
  };
  std::vector<Fixture> fixtures = {{"native/small.csv", "native"},
                                   {"alibaba-v2023/openb_pod_list_default_head300.csv", "alibaba-v2023"},
                                   {"philly/cluster_job_log", "philly"},
                                   {"helios/cluster_log.csv", "helios"},
                                   {"pai-v2020/pai_task_table.csv", "pai-v2020"}};
  std::uint64_t x = 12345;
  auto rnd = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (const auto& f : fixtures) {
    std::string text = slurp(f.rel);
    ASSERT_FALSE(text.empty());
    auto read = [&](const std::string& t) -> bool {
      Result<Trace> r = f.format == "native"          ? read_native_csv(t, f.rel)
                        : f.format == "alibaba-v2023" ? read_alibaba_v2023_pods(t, f.rel)
                        : f.format == "philly"        ? read_philly(t, f.rel)
                        : f.format == "helios"        ? read_helios(t, f.rel)
                                                      : read_pai_v2020({t, f.rel}, std::nullopt);
      if (r) {
        for (const auto& j : r->jobs) {
          EXPECT_GE(j.gpus, 1);
          EXPECT_GT(j.duration_s, 0);
        }
      } else {
        EXPECT_FALSE(r.error().message.empty());
      }
      return r.has_value();
    };
    std::size_t step = std::max<std::size_t>(1, text.size() / 97);
    for (std::size_t cut = 0; cut <= text.size(); cut += step) read(text.substr(0, cut));
    const char junk[] = {'"', ',', '\n', '\0', '\xff', '-', '9', '[', '}', ' '};
    for (int k = 0; k < 300; ++k) {
      std::string t = text;
      for (int flips = 0; flips < 3; ++flips) t[rnd() % t.size()] = junk[rnd() % sizeof(junk)];
      read(t);
    }
  }
  std::string nodes = slurp("alibaba-v2023/openb_node_list_gpu_node.csv");
  for (std::size_t cut = 0; cut <= nodes.size(); cut += nodes.size() / 23) {
    auto c = read_alibaba_v2023_nodes(nodes.substr(0, cut), "nodes.csv");
    if (!c) {
      EXPECT_FALSE(c.error().message.empty());
    }
  }
}

}  // namespace
}  // namespace toposched::sim
