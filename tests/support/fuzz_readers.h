// Every reader of toposched input, by name, as a function of raw bytes: the libFuzzer
// targets (fuzz/fuzz_target.cc, one binary per entry) and the regression replay
// (tests/robustness/fuzz_regressions_test.cc, every entry on every kept input) share this
// table. A reader that accepts its input also runs the writers that follow it in the CLI
// (JSON and YAML of the cluster, every export format, the state file), so an input that
// reads cleanly but cannot be written is found too. Each entry must return without
// crashing, throwing or hanging whatever the bytes. Constant data; the functions keep
// function-local statics (a small cluster), initialised thread-safely.
#pragma once

#include <optional>
#include <string>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cost/job_file.h"
#include "cost/selection.h"
#include "formats/aws_topology.h"
#include "formats/cluster_source.h"
#include "formats/discovery.h"
#include "formats/exporter.h"
#include "formats/gcp_instances.h"
#include "formats/ibnetdiscover.h"
#include "formats/json_output.h"
#include "formats/k8s_nodes.h"
#include "formats/native_spec.h"
#include "formats/node_renames.h"
#include "formats/oci_topology.h"
#include "formats/nvidia_fabric.h"
#include "formats/nvidia_topo.h"
#include "formats/slurm_topology.h"
#include "formats/slurm_topology_fast.h"
#include "formats/topograph_fast.h"
#include "formats/topograph_model.h"
#include "placement/allocation_state.h"
#include "placement/fragmentation.h"
#include "placement/state_file.h"
#include "sim/generator.h"
#include "sim/traces/alibaba_v2023.h"
#include "sim/traces/native_csv.h"
#include "sim/traces/other_traces.h"
#include "slurm/slurm_nodes.h"
#include "support/cluster_equal.h"
#include "support/trace_signature.h"
#include "topology/hostlist.h"
#include "topology/presets.h"
#include "topology/yaml_document.h"

namespace toposched::fuzz {

struct FuzzReader {
  std::string_view name;  // the fuzz target is fuzz_<name>; seeds: scripts/fuzz
  void (*read)(std::string_view bytes);
};

// The writers a loaded cluster goes through in the CLI (show --spec, export --to F).
inline void write_cluster(const Cluster& c) {
  // A few bytes can name a huge preset (nodes=12500); writing it in every format is a
  // performance question (bench/), not a robustness one, and would only time the fuzzer out.
  if (c.gpu_count() > 4096) return;
  (void)write_native_json(c);
  (void)write_native_yaml(c);
  for (const auto& f : export_formats().rows()) (void)f.value(c, ExportOptions{});
}

// A small cluster for the readers that need one (state files, placements).
inline const Cluster& small_cluster() {
  static const Cluster c = *build_preset("dgx-h100?nodes=4");
  return c;
}

inline void discovered_to_cluster(const Result<DiscoveredTopology>& t) {
  if (!t) return;
  DiscoveryOptions o;
  auto merged = merge_discovered({*t}, o);
  if (merged) write_cluster(merged->cluster);
}

inline void read_cluster_spec(std::string_view b) {
  if (auto c = load_cluster_text(b, "fuzz")) write_cluster(*c);
}
// The native spec's fast path must, whenever it takes the bytes, give yaml-cpp's cluster.
inline void read_native(std::string_view b) {
  if (auto fast = read_native_spec_fast(b, "fuzz")) {
    auto root = load_yaml_document(b, "fuzz");  // as load_cluster_text reads a spec
    auto exact = root ? read_native_spec(*root, "fuzz") : Result<Cluster>(tl::unexpected(root.error()));
    if (!exact || !toposched::testing::cluster_difference(*fast, *exact).empty()) std::abort();
  }
  if (auto c = read_native_spec(b, "fuzz")) write_cluster(*c);
}
// load_cluster_text's fast paths (topology.conf, Topograph model) must, whenever they take
// the bytes, give the cluster of the general reader and merge_discovered.
inline void check_fast_cluster(const std::optional<Cluster>& fast, const Result<DiscoveredTopology>& exact) {
  if (!fast) return;
  if (!exact) std::abort();
  auto merged = merge_discovered({*exact}, DiscoveryOptions{});
  if (!merged || !toposched::testing::cluster_difference(*fast, merged->cluster).empty()) std::abort();
}
inline void read_slurm_conf(std::string_view b) {
  auto t = read_slurm_topology(b, "fuzz");
  check_fast_cluster(slurm_topology_cluster_fast(b, DiscoveryOptions{}), t);
  discovered_to_cluster(t);
}
inline void read_topograph(std::string_view b) {
  if (auto fast = topograph_model_cluster_fast(b, DiscoveryOptions{})) {
    auto root = load_yaml_document(b, "fuzz");  // as load_cluster_text reads a model
    check_fast_cluster(fast, root ? read_topograph_model(*root, "fuzz")
                                  : Result<DiscoveredTopology>(tl::unexpected(root.error())));
  }
  discovered_to_cluster(read_topograph_model(b, "fuzz"));
}
// Everything a DiscoveredTopology holds that its two NodeList paths must agree on.
inline std::string discovered_signature(const DiscoveredTopology& t) {
  std::string out = t.source + "\n";
  for (const auto& tier : t.tiers) out += "tier " + tier + "\n";
  for (const auto& s : t.switches) out += fmt::format("switch {} {} {}\n", s.name, s.tier, s.parent);
  for (const auto& n : t.nodes)
    out += fmt::format("node {} {} {} {} {} {} {} {}:{} {} {}\n", n.name, n.switch_name, n.domain, n.sub_domain,
                       n.hardware != nullptr, n.gpu_count, n.gpu_model, n.gpu_model_at.line, n.gpu_model_at.column,
                       n.nic_gbit, n.host_memory_gb);
  for (const auto& w : t.warnings) out += "warning " + w + "\n";
  return out;
}
// The simdjson fast path must answer what the yaml-cpp path answers whenever it answers.
inline void read_k8s(std::string_view b) {
  auto fast = read_k8s_nodes_fast_path(b, "fuzz", {});
  if (fast) {
    auto exact = read_k8s_nodes_yaml_path(b, "fuzz", {});
    if (!exact || discovered_signature(*fast) != discovered_signature(*exact)) std::abort();
  }
  discovered_to_cluster(read_k8s_nodes(b, "fuzz", {}));
}
// Slurm's node list (scontrol -o show node, sinfo --json) as a discovery source.
inline void read_slurm_node_list(std::string_view b) { discovered_to_cluster(slurm::read_slurm_nodes(b, "fuzz")); }
inline void read_aws(std::string_view b) { discovered_to_cluster(read_aws_topology(b, "fuzz")); }
inline void read_gcp(std::string_view b) { discovered_to_cluster(read_gcp_instances(b, "fuzz")); }
inline void read_oci_hosts(std::string_view b) { discovered_to_cluster(read_oci_compute_hosts(b, "fuzz")); }
// Both rename inputs on the same bytes, then the renames applied to a source of two nodes.
inline void read_node_renames(std::string_view b) {
  NodeRenames renames;
  (void)renames.add_mapping(b, "fuzz");
  (void)renames.add_instance_ids(b, "fuzz");
  std::vector<DiscoveredTopology> sources(1);
  for (const char* n : {"i-1", "gpu-01"}) {
    DiscoveredNode node;
    node.name = n;
    sources[0].nodes.push_back(std::move(node));
  }
  std::vector<std::string> warnings;
  (void)renames.apply(sources, warnings);
}
inline void read_oci_rdma(std::string_view b) { discovered_to_cluster(read_oci_rdma_topology(b, "fuzz", "host1")); }
inline void read_ibnet(std::string_view b) {
  if (auto f = read_ibnetdiscover(b, "fuzz")) discovered_to_cluster(f->topology);
}
inline void read_topo_m(std::string_view b) { (void)read_nvidia_topo(b, "fuzz"); }
inline void read_fabric(std::string_view b) { (void)read_nvidia_fabric(b, "fuzz"); }
// The fast path must give the yaml-cpp reader's answer: the same state or the same error.
inline void read_state(std::string_view b) {
  auto s = state_from_json(small_cluster(), b, "fuzz");
  auto exact = state_from_json_exact(small_cluster(), b, "fuzz");
  if (s.has_value() != exact.has_value()) std::abort();
  if (!s && s.error().to_string() != exact.error().to_string()) std::abort();
  if (!s) return;
  auto text = state_to_json(*s);
  auto exact_text = state_to_json(*exact);
  if (text.has_value() != exact_text.has_value() || (text && *text != *exact_text) || !s->check_invariants()) std::abort();
}
inline void read_job(std::string_view b) { (void)parse_job_text(b, "fuzz"); }
inline void read_placement(std::string_view b) { (void)parse_placement_text(small_cluster(), b, "fuzz"); }
inline void read_generator(std::string_view b) { (void)sim::parse_generator_yaml(b, "fuzz"); }
inline void read_native_trace(std::string_view b) {
  if (auto t = sim::read_native_csv(b, "fuzz")) (void)sim::write_native_csv(*t);
}
inline void read_alibaba_pods(std::string_view b) { (void)sim::read_alibaba_v2023_pods(b, "fuzz"); }
inline void read_alibaba_nodes(std::string_view b) {
  if (auto c = sim::read_alibaba_v2023_nodes(b, "fuzz")) write_cluster(*c);
}
// The task table, then (after a line "--- job table ---") an optional job table.
inline void read_pai(std::string_view b) {
  constexpr std::string_view kSplit = "\n--- job table ---\n";
  auto at = b.find(kSplit);
  sim::TextFile tasks{b.substr(0, at), "tasks"};
  std::optional<sim::TextFile> jobs;
  if (at != std::string_view::npos) jobs = sim::TextFile{b.substr(at + kSplit.size()), "jobs"};
  (void)sim::read_pai_v2020(tasks, jobs);
}
// The Philly log's fast path must, whenever it takes the bytes, give the exact path's answer.
inline void read_philly(std::string_view b) {
  const auto exact = sim::read_philly_exact(b, "fuzz");
  if (auto fast = sim::read_philly_fast(b, "fuzz"))
    if (toposched::testing::trace_signature(*fast) != toposched::testing::trace_signature(exact)) std::abort();
}
inline void read_helios(std::string_view b) { (void)sim::read_helios(b, "fuzz"); }
// Expansions are bounded as in write_cluster: a dozen bytes can name millions of hosts
// (d[002-4024]x[001-404] is 1.6 million), and expanding and compressing them takes over 10 s
// under the fuzzer's instrumentation. Like write_cluster's huge presets, that is a question
// of performance, not robustness; tests/topology/hostlist_test.cc checks the 10 million cap.
inline constexpr std::size_t kFuzzHostlistNames = 100'000;
inline void read_hostlist(std::string_view b) {
  if (auto names = expand_hostlist(b, kFuzzHostlistNames)) (void)compress_hostlist(*names);
}
inline void read_gpu_selection(std::string_view b) {
  (void)parse_gpu_selection(small_cluster(), b);
  (void)parse_size(b);
}
inline void read_job_sizes(std::string_view b) { (void)parse_job_sizes(b); }
inline void read_preset(std::string_view b) {
  if (auto c = build_preset(b)) write_cluster(*c);
}

inline const std::vector<FuzzReader>& fuzz_readers() {
  static const std::vector<FuzzReader> kReaders = {
      {"cluster_spec", read_cluster_spec},
      {"native_spec", read_native},
      {"slurm_topology", read_slurm_conf},
      {"topograph_model", read_topograph},
      {"k8s_nodes", read_k8s},
      {"slurm_nodes", read_slurm_node_list},
      {"aws_topology", read_aws},
      {"gcp_instances", read_gcp},
      {"oci_compute_hosts", read_oci_hosts},
      {"oci_rdma_topology", read_oci_rdma},
      {"node_renames", read_node_renames},
      {"ibnetdiscover", read_ibnet},
      {"nvidia_topo", read_topo_m},
      {"nvidia_fabric", read_fabric},
      {"state_file", read_state},
      {"job_file", read_job},
      {"placement_file", read_placement},
      {"generator", read_generator},
      {"native_trace", read_native_trace},
      {"alibaba_pods", read_alibaba_pods},
      {"alibaba_nodes", read_alibaba_nodes},
      {"pai_trace", read_pai},
      {"philly_trace", read_philly},
      {"helios_trace", read_helios},
      {"hostlist", read_hostlist},
      {"gpu_selection", read_gpu_selection},
      {"job_sizes", read_job_sizes},
      {"preset", read_preset},
  };
  return kReaders;
}

inline const FuzzReader* find_fuzz_reader(std::string_view name) {
  for (const FuzzReader& r : fuzz_readers())
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace toposched::fuzz
