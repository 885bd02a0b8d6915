// The kube-scheduler extender's filter verb, end to end as the HTTP handler runs it (decode
// the Go JSON body, plan or look up, encode the answer), on 5,000 DGX H100 nodes
// (preset:dgx-h100?nodes=5000, 40,000 GPUs). p50/p99/max per call as counters: thread CPU
// time, and wall-clock p50/p99.
//
//  - BM_FilterMember_NodeNames: nodeCacheCapable; a member of an already planned group
//    (every member after the first): 5,000 names in, its one node out, 4,999 FailedNodes.
//  - BM_FilterPlanSinglePod_NodeNames: a new 1-GPU pod each call: the topo decision and the
//    reservation on the cluster, then released outside the timed part.
//  - BM_FilterMember_FullNodes: nodeCacheCapable false: 5,000 v1.Node objects of ~1.5 KB
//    (labels, capacity, conditions, images), 7.6 MB per request.
#include <time.h>

#include <algorithm>
#include <chrono>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "k8s/extender.h"
#include "topology/presets.h"

namespace toposched::k8s {
namespace {

const Cluster& cluster() {
  static const Cluster c = *build_preset("dgx-h100?nodes=5000");
  return c;
}

std::string pod_json(std::string_view name, int gpus, std::string_view group, int size) {
  std::string meta = fmt::format(R"("name":"{}","namespace":"ml","uid":"uid-{}")", name, name);
  if (!group.empty())
    meta += fmt::format(R"(,"labels":{{"scheduling.x-k8s.io/pod-group":"{}"}},"annotations":{{)"
                        R"("scheduling.x-k8s.io/min-member":"{}","toposched.io/tp":"8","toposched.io/pp":"4"}})",
                        group, size);
  return fmt::format(R"({{"metadata":{{{}}},"spec":{{"containers":[{{"name":"main","image":"nvcr.io/nvidia/pytorch:24.05-py3",)"
                     R"("resources":{{"limits":{{"nvidia.com/gpu":"{}","cpu":"96","memory":"1600Gi"}}}}}}]}},"status":{{}}}})",
                     meta, gpus);
}

std::string names_body(const std::string& pod) {
  std::string body = R"({"Pod":)" + pod + R"(,"Nodes":null,"NodeNames":[)";
  for (std::size_t i = 0; i < cluster().node_count(); ++i) {
    if (i) body += ',';
    body += '"' + cluster().node_name(NodeId(static_cast<std::uint32_t>(i))) + '"';
  }
  return body + "]}";
}

std::string node_object(const std::string& name) {
  return fmt::format(
      R"({{"metadata":{{"name":"{0}","uid":"node-uid-{0}","resourceVersion":"123456","labels":{{"kubernetes.io/hostname":"{0}",)"
      R"("nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","nvidia.com/gpu.count":"8","topology.kubernetes.io/zone":"z1",)"
      R"("network.topology.nvidia.com/leaf":"leaf-17","network.topology.nvidia.com/spine":"spine-2"}}}},)"
      R"("spec":{{"podCIDR":"10.1.2.0/24","providerID":"baremetal://{0}"}},"status":{{"capacity":{{"cpu":"224",)"
      R"("memory":"2113389096Ki","nvidia.com/gpu":"8","pods":"110"}},"allocatable":{{"cpu":"224","memory":"2113286696Ki",)"
      R"("nvidia.com/gpu":"8","pods":"110"}},"conditions":[{{"type":"Ready","status":"True","lastHeartbeatTime":)"
      R"("2026-11-30T10:00:00Z","lastTransitionTime":"2026-11-01T10:00:00Z","reason":"KubeletReady","message":)"
      R"("kubelet is posting ready status"}},{{"type":"MemoryPressure","status":"False","reason":"KubeletHasSufficientMemory"}}],)"
      R"("addresses":[{{"type":"InternalIP","address":"10.0.3.4"}},{{"type":"Hostname","address":"{0}"}}],)"
      R"("daemonEndpoints":{{"kubeletEndpoint":{{"Port":10250}}}},"nodeInfo":{{"machineID":"abc","systemUUID":"def",)"
      R"("bootID":"ghi","kernelVersion":"6.1.0-27-amd64","osImage":"Debian GNU/Linux 12","containerRuntimeVersion":)"
      R"("containerd://1.7.22","kubeletVersion":"v1.31.2","kubeProxyVersion":"","operatingSystem":"linux",)"
      R"("architecture":"amd64"}},"images":[{{"names":["nvcr.io/nvidia/pytorch@sha256:0123456789abcdef"],"sizeBytes":9876543210}}]}}}})",
      name);
}

std::string nodes_body(const std::string& pod) {
  std::string body = R"({"Pod":)" + pod + R"(,"Nodes":{"metadata":{},"items":[)";
  for (std::size_t i = 0; i < cluster().node_count(); ++i) {
    if (i) body += ',';
    body += node_object(cluster().node_name(NodeId(static_cast<std::uint32_t>(i))));
  }
  return body + R"(]},"NodeNames":null})";
}

double q(std::vector<double>& v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Per call: CPU time of this thread (what the call costs; the shared VM's other users do
// not count) and wall-clock time (what kube-scheduler would wait, here inflated by them).
struct Samples {
  std::vector<double> cpu_us, wall_us;
};

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

template <class Fn>
void timed(Samples& s, Fn&& fn) {
  const double c0 = thread_cpu_us();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  s.wall_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  s.cpu_us.push_back(thread_cpu_us() - c0);
}

void report(benchmark::State& st, Samples& s, std::size_t body_bytes) {
  st.counters["p50_us"] = q(s.cpu_us, 0.50);
  st.counters["p99_us"] = q(s.cpu_us, 0.99);
  st.counters["max_us"] = s.cpu_us.back();
  st.counters["wall_p50_us"] = q(s.wall_us, 0.50);
  st.counters["wall_p99_us"] = q(s.wall_us, 0.99);
  st.counters["body_KiB"] = static_cast<double>(body_bytes) / 1024.0;
}

void member_filter(benchmark::State& st, bool full_nodes) {
  EngineLedger ledger(cluster());
  GangPlanner planner(ledger, steady_clock_ms());
  Extender ext(planner, std::nullopt);
  const std::string pod = pod_json("train-3", 8, "train", 8);
  const std::string body = full_nodes ? nodes_body(pod) : names_body(pod);
  if (ext.filter(body).body.find("Error\":\"\"") == std::string::npos) st.SkipWithError("first filter failed");
  Samples s;
  for (auto _ : st) {
    ExtenderReply r;
    timed(s, [&] { r = ext.filter(body); });
    benchmark::DoNotOptimize(r);
  }
  report(st, s, body.size());
}

void BM_FilterMember_NodeNames(benchmark::State& st) { member_filter(st, false); }
void BM_FilterMember_FullNodes(benchmark::State& st) { member_filter(st, true); }

void BM_FilterPlanSinglePod_NodeNames(benchmark::State& st) {
  EngineLedger ledger(cluster());
  GangPlanner planner(ledger, steady_clock_ms());
  Extender ext(planner, std::nullopt);
  const std::string body = names_body(pod_json("solo", 1, "", 0));
  Samples s;
  for (auto _ : st) {
    ExtenderReply r;
    timed(s, [&] { r = ext.filter(body); });
    benchmark::DoNotOptimize(r);
    st.PauseTiming();
    (void)ledger.release("k8s:ml:pod:solo");
    planner.forget("k8s:ml:pod:solo");
    st.ResumeTiming();
  }
  report(st, s, body.size());
}

BENCHMARK(BM_FilterMember_NodeNames)->Unit(benchmark::kMicrosecond)->Iterations(2000);
BENCHMARK(BM_FilterPlanSinglePod_NodeNames)->Unit(benchmark::kMicrosecond)->Iterations(2000);
BENCHMARK(BM_FilterMember_FullNodes)->Unit(benchmark::kMillisecond)->Iterations(50);

}  // namespace
}  // namespace toposched::k8s

BENCHMARK_MAIN();
