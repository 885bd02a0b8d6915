// Round trips of every JSON example in kube-scheduler's extender/v1/types_test.go
// (TestCompatibility), github.com/kubernetes/kube-scheduler at commit
// e87dbddd27a5bd4c2028727c7ccc082cfb2cdc09 (staging/src/k8s.io/kube-scheduler/extender/v1 in
// kubernetes/kubernetes). As there: encode(obj) must equal the expected JSON byte for byte,
// and decoding the expected JSON *lower-cased as a whole* must give back obj (Go decodes
// keys case-insensitively).
#include <algorithm>
#include <cctype>
#include <string>

#include <gtest/gtest.h>

#include "k8s/extender_types.h"
#include "k8s/go_json.h"

namespace toposched::k8s {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

Pod named_pod(std::string name) {
  Pod p;
  p.name = std::move(name);
  return p;
}

Node named_node(std::string name) {
  Node n;
  n.name = std::move(name);
  return n;
}

constexpr std::string_view kPodJson = R"({"metadata":{"name":"podname"},"spec":{"containers":null},"status":{}})";
constexpr std::string_view kNodeJson =
    R"({"metadata":{"name":"nodename"},"spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},)"
    R"("nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"","osImage":"",)"
    R"("containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"",)"
    R"("architecture":""}}})";

template <class T, class Decode>
void round_trip(const T& obj, const std::string& expect, Decode decode) {
  EXPECT_EQ(encode(obj), expect);
  auto back = decode(lower(expect));
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_TRUE(*back == obj);
  // And the original casing decodes to the same object.
  auto exact = decode(expect);
  ASSERT_TRUE(exact) << exact.error().to_string();
  EXPECT_TRUE(*exact == obj);
}

TEST(ExtenderTypesCompat, PreemptionResult) {
  ExtenderPreemptionResult obj;
  obj.node_name_to_meta_victims.emplace();
  (*obj.node_name_to_meta_victims)["foo"] = MetaVictims{{MetaPod{"myuid"}}, 1};
  round_trip(obj, R"({"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}})",
             decode_preemption_result);
}

TEST(ExtenderTypesCompat, PreemptionArgs) {
  ExtenderPreemptionArgs obj;
  obj.pod = named_pod("podname");
  obj.node_name_to_victims.emplace();
  (*obj.node_name_to_victims)["foo"] = Victims{{named_pod("podname")}, 1};
  obj.node_name_to_meta_victims.emplace();
  (*obj.node_name_to_meta_victims)["foo"] = MetaVictims{{MetaPod{"myuid"}}, 1};
  const std::string expect = std::string(R"({"Pod":)") + std::string(kPodJson) +
                             R"(,"NodeNameToVictims":{"foo":{"Pods":[)" + std::string(kPodJson) +
                             R"(],"NumPDBViolations":1}},"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}})";
  round_trip(obj, expect, decode_preemption_args);
}

TEST(ExtenderTypesCompat, ExtenderArgs) {
  ExtenderArgs obj;
  obj.pod = named_pod("podname");
  obj.nodes = NodeList{{named_node("nodename")}};
  obj.node_names = std::vector<std::string>{"node1"};
  const std::string expect = std::string(R"({"Pod":)") + std::string(kPodJson) +
                             R"(,"Nodes":{"metadata":{},"items":[)" + std::string(kNodeJson) +
                             R"(]},"NodeNames":["node1"]})";
  round_trip(obj, expect, decode_extender_args);
}

TEST(ExtenderTypesCompat, FilterResult) {
  ExtenderFilterResult obj;
  obj.nodes = NodeList{{named_node("nodename")}};
  obj.node_names = std::vector<std::string>{"node1"};
  obj.failed_nodes = FailedNodesMap{{"foo", "bar"}};
  obj.failed_and_unresolvable_nodes = FailedNodesMap{{"baz", "qux"}};
  obj.error = "myerror";
  const std::string expect = std::string(R"({"Nodes":{"metadata":{},"items":[)") + std::string(kNodeJson) +
                             R"(]},"NodeNames":["node1"],"FailedNodes":{"foo":"bar"},)"
                             R"("FailedAndUnresolvableNodes":{"baz":"qux"},"Error":"myerror"})";
  round_trip(obj, expect, decode_filter_result);
}

TEST(ExtenderTypesCompat, BindingArgs) {
  ExtenderBindingArgs obj{"mypodname", "mypodnamespace", "mypoduid", "mynode"};
  round_trip(obj, R"({"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid","Node":"mynode"})",
             decode_binding_args);
}

TEST(ExtenderTypesCompat, BindingResult) {
  round_trip(ExtenderBindingResult{"myerror"}, R"({"Error":"myerror"})", decode_binding_result);
}

TEST(ExtenderTypesCompat, HostPriority) {
  round_trip(HostPriority{"myhost", 1}, R"({"Host":"myhost","Score":1})", decode_host_priority);
}

// Beyond the upstream examples: Go's conventions the extender relies on.

TEST(ExtenderTypes, EmptyObjectsEncodeNilAsNull) {
  EXPECT_EQ(encode(ExtenderArgs{}), R"({"Pod":null,"Nodes":null,"NodeNames":null})");
  EXPECT_EQ(encode(ExtenderFilterResult{}),
            R"({"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""})");
  EXPECT_EQ(encode(HostPriorityList{}), "null");
  EXPECT_EQ(encode(ExtenderPreemptionResult{}), R"({"NodeNameToMetaVictims":null})");
}

TEST(ExtenderTypes, StringsAreEscapedAsGoDoes) {
  EXPECT_EQ(encode(ExtenderBindingResult{"a<b>&\"c\"\n\x01\xff\xe2\x80\xa8"}),
            R"({"Error":"a\u003cb\u003e\u0026\"c\"\n\u0001\ufffd\u2028"})");
}

TEST(ExtenderTypes, KeysMatchUnderGoFolding) {
  EXPECT_TRUE(go_key_matches("nodenames", "NodeNames"));
  EXPECT_TRUE(go_key_matches("NODENAMES", "NodeNames"));
  EXPECT_TRUE(go_key_matches("\xE2\x84\xAA", "k"));  // KELVIN SIGN folds to k
  EXPECT_TRUE(go_key_matches("\xC5\xBF", "S"));      // LONG S folds to s
  EXPECT_FALSE(go_key_matches("nodename", "NodeNames"));
  EXPECT_FALSE(go_key_matches("node_names", "NodeNames"));
}

TEST(ExtenderTypes, NullLeavesScalarsAndClearsLists) {
  auto a = decode_binding_args(R"({"PodName":"p","podname":null,"Node":"n"})");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->pod_name, "p");
  auto b = decode_extender_args(R"({"NodeNames":["a"],"nodenames":null})");
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->node_names.has_value());
  auto c = decode_extender_args(R"({"NodeNames":["a"],"nodeNAMES":["b","c"]})");
  ASSERT_TRUE(c);
  EXPECT_EQ(*c->node_names, (std::vector<std::string>{"b", "c"}));
}

TEST(ExtenderTypes, MalformedAndMistypedBodiesAreErrorsWithPlace) {
  for (std::string_view bad : {"", "{", R"({"NodeNames":[1]})", R"({"NodeNames":"x"})", R"([1,2])",
                               R"({"Pod":{"metadata":{"name":5}}})", R"({"NodeNames":["a"]} x)", "nul"}) {
    auto r = decode_extender_args(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kParse);
      EXPECT_EQ(r.error().where.file, "request body");
    }
  }
  auto r = decode_extender_args("{\n  \"NodeNames\": 7}");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().where.line, 2);
  EXPECT_EQ(r.error().where.column, 16);
  EXPECT_NE(r.error().message.find("cannot unmarshal number"), std::string::npos) << r.error().message;
  // A syntax error has its line and column too, however simdjson reported it.
  for (std::string_view broken : {"{\n  \"NodeNames\": [\"a\",,]}", "{\n  \"NodeNames\": [\"a\"", "{\"NodeNames\":\n tru}"}) {
    auto s = decode_extender_args(broken);
    ASSERT_FALSE(s) << broken;
    EXPECT_EQ(s.error().where.file, "request body") << s.error().to_string();
    EXPECT_EQ(s.error().where.line, 2) << s.error().to_string();
    EXPECT_GT(s.error().where.column, 0) << s.error().to_string();
  }
  auto f = decode_binding_result(R"({"Error":1.5})");
  EXPECT_FALSE(f);
  auto i = decode_host_priority(R"({"Host":"h","Score":1.5})");
  EXPECT_FALSE(i);
}

TEST(ExtenderTypes, PodAndNodeReadTheFieldsThatMatterAndKeepTheirBytes) {
  const std::string pod_json =
      R"({"kind":"Pod","metadata":{"name":"w-3","namespace":"ml","uid":"u-3","labels":{"a":"b"},)"
      R"("annotations":{"toposched.io/tp":"8"},"managedFields":[{"x":{"y":[1,2,{"z":null}]}}]},)"
      R"("spec":{"priority":100,"initContainers":[{"name":"init","resources":{"limits":{"nvidia.com/gpu":"2"}}}],)"
      R"("containers":[{"name":"main","image":"x","resources":{"limits":{"nvidia.com/gpu":8,"cpu":"500m"},)"
      R"("requests":{"nvidia.com/gpu":"8"}}}]},"status":{"phase":"Pending","nominatedNodeName":"n1"}})";
  const std::string body = R"({"Pod":)" + pod_json + R"(,"Nodes":{"items":[{"metadata":{"name":"n1",)"
                           R"("labels":{"l":"v"}},"status":{"images":[{"names":["a","b"]}]}},null]}})";
  auto a = decode_extender_args(body);
  ASSERT_TRUE(a) << a.error().to_string();
  ASSERT_TRUE(a->pod);
  EXPECT_EQ(a->pod->name, "w-3");
  EXPECT_EQ(a->pod->namespace_name, "ml");
  EXPECT_EQ(a->pod->uid, "u-3");
  EXPECT_EQ(a->pod->annotations.at("toposched.io/tp"), "8");
  EXPECT_EQ(a->pod->priority, 100);
  EXPECT_EQ(a->pod->nominated_node_name, "n1");
  ASSERT_EQ(a->pod->containers.size(), 1u);
  EXPECT_EQ(a->pod->containers[0].limits.at("nvidia.com/gpu"), "8");
  EXPECT_EQ(a->pod->init_containers[0].limits.at("nvidia.com/gpu"), "2");
  EXPECT_EQ(encode(*a->pod), pod_json);
  ASSERT_TRUE(a->nodes);
  ASSERT_EQ(a->nodes->items.size(), 2u);
  EXPECT_EQ(a->nodes->items[0].name, "n1");
  EXPECT_EQ(encode(a->nodes->items[0]),
            R"({"metadata":{"name":"n1","labels":{"l":"v"}},"status":{"images":[{"names":["a","b"]}]}})");
}

}  // namespace
}  // namespace toposched::k8s
