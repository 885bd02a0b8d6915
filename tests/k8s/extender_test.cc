// The extender's verbs as the HTTP handlers call them (body in, status and body out), the
// API server resolution, and the Binding client against an in-process HTTP server standing
// in for the API server (loopback, a port it picks).
#include <atomic>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "k8s/extender.h"
#include "topology/presets.h"

namespace toposched::k8s {
namespace {

struct ExtenderVerbsTest : ::testing::Test {
  Cluster cluster = *build_preset("dgx-h100?nodes=4");
  EngineLedger ledger{cluster};
  std::int64_t now = 0;
  GangPlanner planner{ledger, [this] { return now; }};

  std::string node(int i) const { return cluster.node_name(NodeId(static_cast<std::uint32_t>(i))); }
  std::string args_for(std::string_view pod_name, int gpus) const {
    return fmt::format(R"({{"Pod":{{"metadata":{{"name":"{}","namespace":"ns","uid":"u-{}"}},"spec":{{"containers":[)"
                       R"({{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":"{}"}}}}}}]}}}},"NodeNames":["{}","{}"]}})",
                       pod_name, pod_name, gpus, node(0), node(1));
  }
};

TEST_F(ExtenderVerbsTest, VerbTableNamesTheExtenderAndPluginVerbs) {
  std::vector<std::string_view> names;
  for (const auto& v : extender_verbs()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{"filter", "prioritize", "bind", "preempt", "plan", "member", "unreserve",
                                                  "dry-run"}));
}

TEST_F(ExtenderVerbsTest, BadBodiesGetTheDocumentedAnswers) {
  Extender ext(planner, std::nullopt);
  auto f = ext.filter("{\"Pod\":");
  EXPECT_EQ(f.status, 200);
  EXPECT_NE(nlohmann::json::parse(f.body)["Error"].get<std::string>().find("request body"), std::string::npos);
  auto b = ext.bind("[]");
  EXPECT_EQ(b.status, 200);
  EXPECT_FALSE(nlohmann::json::parse(b.body)["Error"].get<std::string>().empty());
  EXPECT_EQ(ext.prioritize("nope").status, 400);
  EXPECT_EQ(ext.preempt("{").status, 400);
  EXPECT_TRUE(nlohmann::json::parse(ext.preempt("{").body)["error"].contains("message"));
  EXPECT_EQ(ext.member("{").status, 400);
  EXPECT_EQ(ext.unreserve(R"({"PodName":"p"})").status, 400);  // no PodNamespace
}

TEST_F(ExtenderVerbsTest, PlanIsFilterAndMemberInOneAnswer) {
  Extender ext(planner, std::nullopt);
  auto p = ext.plan(args_for("q", 4));
  ASSERT_EQ(p.status, 200);
  auto j = nlohmann::json::parse(p.body);
  ASSERT_EQ(j["Filter"]["NodeNames"].size(), 1u);
  EXPECT_EQ(j["Member"]["job"], "k8s:ns:pod:q");
  EXPECT_EQ(j["Member"]["node"], j["Filter"]["NodeNames"][0]);
  auto bad = nlohmann::json::parse(ext.plan("{\"Pod\":").body);
  EXPECT_FALSE(bad["Filter"]["Error"].get<std::string>().empty());
  EXPECT_TRUE(bad["Member"].is_null());
}

// dry-run: the pod's whole group planned within NodeNames from the pod itself (serve's own
// request builder: a Kueue annotation the plugin never copied counts), holding nothing; 422
// where it does not fit, 400 for a bad body.
TEST_F(ExtenderVerbsTest, DryRunPlansTheGroupFromThePodAndHoldsNothing) {
  Extender ext(planner, std::nullopt);
  auto group_pod = [&](std::string_view annotations) {
    return fmt::format(R"({{"Pod":{{"metadata":{{"name":"w-0","namespace":"ns","uid":"u-w-0",)"
                       R"("annotations":{{"toposched.io/pod-group":"g","toposched.io/group-size":"2",)"
                       R"("toposched.io/tp":"4"{}}}}},"spec":{{"containers":[)"
                       R"({{"name":"c","resources":{{"limits":{{"nvidia.com/gpu":"4"}}}}}}]}}}},"NodeNames":["{}","{}"]}})",
                       annotations, node(0), node(1));
  };
  auto fits = ext.dry_run(group_pod(""));
  ASSERT_EQ(fits.status, 200) << fits.body;
  auto j = nlohmann::json::parse(fits.body);
  EXPECT_EQ(j["job"], "k8s:ns:g");
  ASSERT_EQ(j["gpus"].size(), 8u);
  // Two 4-GPU pods share one 8-GPU node (gpus_per_pod, not one pod per node).
  EXPECT_EQ(j["gpus"][0]["node"], j["gpus"][7]["node"]);
  EXPECT_TRUE(j["predicted_comm_us"].is_number()) << fits.body;
  EXPECT_TRUE(ledger.snapshot().job_ids().empty());  // nothing held
  // Kueue's slice annotations (not in the plugin's old hand-copied subset) reach the request:
  // 2 pods cannot be cut into slices of 3.
  auto sliced = ext.dry_run(group_pod(R"(,"kueue.x-k8s.io/podset-slice-size":"3",)"
                                      R"("kueue.x-k8s.io/podset-slice-required-topology":"kubernetes.io/hostname")"));
  EXPECT_EQ(sliced.status, 400) << sliced.body;
  EXPECT_NE(sliced.body.find("slices of 3"), std::string::npos) << sliced.body;
  // Kueue's required topology: the whole group on one node (8 GPUs fit one, 12 do not).
  auto one_node = ext.dry_run(group_pod(R"(,"kueue.x-k8s.io/podset-required-topology":"kubernetes.io/hostname")"));
  ASSERT_EQ(one_node.status, 200) << one_node.body;
  auto too_big = ext.dry_run(fmt::format(R"({{"Pod":{{"metadata":{{"name":"w-0","namespace":"ns","uid":"u-w-0",)"
                                         R"("annotations":{{"toposched.io/pod-group":"h","toposched.io/group-size":"3",)"
                                         R"("kueue.x-k8s.io/podset-required-topology":"kubernetes.io/hostname"}}}},)"
                                         R"("spec":{{"containers":[{{"name":"c","resources":{{"limits":)"
                                         R"({{"nvidia.com/gpu":"4"}}}}}}]}}}},"NodeNames":["{}","{}"]}})",
                                         node(0), node(1)));
  EXPECT_EQ(too_big.status, 422) << too_big.body;  // 12 GPUs on one 8-GPU node
  EXPECT_EQ(nlohmann::json::parse(too_big.body)["error"]["code"], "infeasible");
  EXPECT_EQ(ext.dry_run("{").status, 400);
  EXPECT_EQ(ext.dry_run(args_for("cpu", 0)).status, 400);  // no GPUs: nothing to place
  EXPECT_TRUE(ledger.snapshot().job_ids().empty());
}

TEST_F(ExtenderVerbsTest, MemberAndUnreserveAnswerJson) {
  Extender ext(planner, std::nullopt);
  ASSERT_EQ(ext.filter(args_for("p", 4)).status, 200);
  auto m = ext.member(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u-p","Node":""})");
  ASSERT_EQ(m.status, 200) << m.body;
  auto j = nlohmann::json::parse(m.body);
  EXPECT_EQ(j["job"], "k8s:ns:pod:p");
  EXPECT_EQ(j["size"], 1);
  EXPECT_EQ(j["bound"], 0);
  EXPECT_EQ(j["gpus"].get<std::vector<int>>(), planner.groups()[0].members[0].gpus);
  EXPECT_EQ(j["gpus"].size(), 4u);
  auto u = ext.unreserve(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u-p","Node":""})");
  EXPECT_EQ(nlohmann::json::parse(u.body)["released"], "k8s:ns:pod:p");
  auto gone = ext.member(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u-p","Node":""})");
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(nlohmann::json::parse(gone.body)["error"]["code"], "not_found");
}

TEST_F(ExtenderVerbsTest, FilterThenBindWithoutApiServerSaysSo) {
  Extender ext(planner, std::nullopt);
  auto f = nlohmann::json::parse(ext.filter(args_for("p", 2)).body);
  ASSERT_EQ(f["NodeNames"].size(), 1u);
  const std::string chosen = f["NodeNames"][0];
  auto b = nlohmann::json::parse(
      ext.bind(fmt::format(R"({{"PodName":"p","PodNamespace":"ns","PodUID":"u-p","Node":"{}"}})", chosen)).body);
  EXPECT_NE(b["Error"].get<std::string>().find("no API server"), std::string::npos);
}

TEST(ApiServer, InClusterDefaultsAndFlagOverrides) {
  auto env = [](const char* name) -> const char* {
    std::string_view n(name);
    if (n == "KUBERNETES_SERVICE_HOST") return "10.96.0.1";
    if (n == "KUBERNETES_SERVICE_PORT") return "443";
    return nullptr;
  };
  auto none = [](const char*) -> const char* { return nullptr; };
  auto in_cluster = resolve_api_server("", "", "", env);
  ASSERT_TRUE(in_cluster);
  EXPECT_EQ(in_cluster->url, "https://10.96.0.1:443");
  EXPECT_EQ(in_cluster->token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
  EXPECT_EQ(in_cluster->ca_file, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
  auto flags = resolve_api_server("http://127.0.0.1:8080", "/tmp/t", "/tmp/ca", env);
  EXPECT_EQ(flags->url, "http://127.0.0.1:8080");
  EXPECT_EQ(flags->token_file, "/tmp/t");
  EXPECT_FALSE(resolve_api_server("", "", "", none));
  auto v6 = resolve_api_server("", "", "", [](const char* n) -> const char* {
    return std::string_view(n) == "KUBERNETES_SERVICE_HOST" ? "fd00::1" : nullptr;
  });
  EXPECT_EQ(v6->url, "https://[fd00::1]:443");
}

TEST(BindingClientTest, PostsTheBindingWithTokenAndAnnotations) {
  httplib::Server api;
  std::string seen_path, seen_auth, seen_body;
  api.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)", [&](const httplib::Request& req, httplib::Response& res) {
    seen_path = req.path;
    seen_auth = req.get_header_value("Authorization");
    seen_body = req.body;
    res.status = req.matches[2] == "taken" ? 409 : req.matches[2] == "garbled" ? 500 : 201;
    res.set_content(req.matches[2] == "garbled" ? "{\"kind\":\"Status\",\n \"kind\":\"Status\"}"
                                                : R"({"kind":"Status","message":"pod taken is already assigned"})",
                    "application/json");
  });
  const int port = api.bind_to_any_port("127.0.0.1");
  std::thread t([&] { api.listen_after_bind(); });
  const std::string token_file = ::testing::TempDir() + "/k8s-token";
  { std::FILE* f = std::fopen(token_file.c_str(), "w"); std::fputs("tok-1\n", f); std::fclose(f); }
  BindingClient client(ApiServerConfig{fmt::format("http://127.0.0.1:{}", port), token_file, ""});
  BindingPlan plan{"w-0", "ml", "uid-0", "node-a", "k8s:ml:g", {{"toposched.io/gpus", "0,1"}}};
  auto ok = client.bind(plan);
  EXPECT_TRUE(ok) << (ok ? "" : ok.error().message);
  EXPECT_EQ(seen_path, "/api/v1/namespaces/ml/pods/w-0/binding");
  EXPECT_EQ(seen_auth, "Bearer tok-1");
  auto body = nlohmann::json::parse(seen_body);
  EXPECT_EQ(body["kind"], "Binding");
  EXPECT_EQ(body["target"]["name"], "node-a");
  EXPECT_EQ(body["metadata"]["uid"], "uid-0");
  EXPECT_EQ(body["metadata"]["annotations"]["toposched.io/gpus"], "0,1");
  plan.pod_name = "taken";
  auto refused = client.bind(plan);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_NE(refused.error().message.find("already assigned"), std::string::npos);
  // A reply that is not one JSON Status is named with its place, not dropped.
  plan.pod_name = "garbled";
  auto garbled = client.bind(plan);
  ASSERT_FALSE(garbled);
  EXPECT_NE(garbled.error().message.find("kube-apiserver response:2:2: key 'kind' repeated"), std::string::npos)
      << garbled.error().message;
  api.stop();
  t.join();
  BindingClient down(ApiServerConfig{fmt::format("http://127.0.0.1:{}", port), "", ""});
  auto unreachable = down.bind(plan);
  ASSERT_FALSE(unreachable);
  EXPECT_EQ(unreachable.error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace toposched::k8s
