// Reading large inputs (issue 18: a 50 MB input of any format in <= 5 s and <= 1 GB; issue
// 34: a 100,000-node cluster in every cluster format in <= 2 s and <= 1 GB).
// For each format a child process generates about TARGET_MB of valid input in memory (or,
// with nodes=N, a cluster of N nodes in each cluster format), reads it with the format's
// reader and reports the read's wall and CPU time and the child's peak resident memory
// (which includes the input text itself, as the CLI holds the whole file). A fork per
// format keeps one reader's peak from hiding another's.
//
//   build/release/bench/large_inputs [TARGET_MB=50] [nodes=N] [only=SUBSTRING] [model-only]
//
// model-only: no reader. For each cluster format, the node count its generated input holds
// (at TARGET_MB, or N) and the same cluster model -- the same nodes, node names, GPUs per
// node, switches and tiers as that reader builds (checked on a 3,200-node sample) -- built
// directly through ClusterBuilder, with its CPU time, the child's peak resident memory and
// the model's resident bytes per node: the floor any reader of that format pays.
//
// Results: docs/performance.md ("Large inputs").
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats/cluster_source.h"
#include "formats/discovered.h"
#include "formats/ibnetdiscover.h"
#include "formats/k8s_nodes.h"
#include "placement/state_file.h"
#include "sim/generator.h"
#include "sim/traces/native_csv.h"
#include "sim/traces/other_traces.h"
#include "../tests/support/ibnet_generator.h"
#include "topology/presets.h"

using namespace toposched;

namespace {

std::size_t g_target = 50u << 20;
std::size_t g_nodes = 0;  // nodes=N: cluster formats hold N nodes (and the size is what it is)
std::string g_only;       // only=SUBSTRING: the cases whose name holds it

// Whether a generator is done: the target size, or with nodes=N, N nodes.
bool enough(std::size_t bytes, std::size_t nodes) { return g_nodes ? nodes >= g_nodes : bytes >= g_target; }

// Appends `piece(i)` for i = 0, 1, ... until the text reaches the target size (or, for a
// cluster format with nodes=N, `per_piece` nodes a piece, N nodes).
std::string grow(std::string text, const std::function<std::string(std::size_t)>& piece, const std::string& tail = "",
                 std::size_t per_piece = 0) {
  text.reserve(g_target + (1u << 20));
  for (std::size_t i = 0; per_piece && g_nodes ? i * per_piece < g_nodes : text.size() + tail.size() < g_target; ++i)
    text += piece(i);
  return text + tail;
}

// Slurm topology.conf: leaves of 32 individually named nodes under spines.
std::string slurm_conf() {
  std::string spines;
  return grow("", [](std::size_t i) {
    std::string line = fmt::format("SwitchName=leaf{:06d} Nodes=", i);
    for (int k = 0; k < 32; ++k) line += fmt::format("{}n{:06d}x{:02d}", k ? "," : "", i, k);
    line += fmt::format("\nSwitchName=spine{:06d} Switches=leaf{:06d}\n", i, i);
    return line;
  }, "", 32);
}

// Topograph model: a switch per block, each block listing 32 nodes one by one.
std::string topograph_model() {
  std::string switches = "switches:\n  core: {}\n", blocks = "blocks:\n";
  std::size_t i = 0;
  while (!enough(switches.size() + blocks.size(), 32 * i)) {
    switches += fmt::format("  leaf{:06d}: {{}}\n", i);
    blocks += fmt::format("- switch: leaf{:06d}\n  nodes:\n", i);
    for (int k = 0; k < 32; ++k) blocks += fmt::format("  - n{:06d}x{:02d}\n", i, k);
    ++i;
  }
  return switches + blocks;
}

// Native spec: 1-GPU node type, nodes listed one by one under leaves.
std::string native_spec() {
  std::string head =
      "version: 1\nname: big\nnode_types:\n- name: t\n  gpu: {model: H100, count: 1}\nfabric:\n  tiers: [{name: leaf}]\n"
      "  switches:\n";
  std::string nodes = "nodes:\n";
  std::size_t i = 0;
  while (!enough(head.size() + nodes.size(), 32 * i)) {
    head += fmt::format("  - {{name: leaf{:06d}, tier: leaf, nodes: \"n{:06d}x[00-31]\"}}\n", i, i);
    for (int k = 0; k < 32; ++k) nodes += fmt::format("- {{names: n{:06d}x{:02d}, type: t}}\n", i, k);
    ++i;
  }
  return head + nodes;
}

std::string k8s_nodes() {
  return grow("{\"kind\": \"NodeList\", \"items\": [\n", [](std::size_t i) {
    return fmt::format(
        "{}{{\"metadata\": {{\"name\": \"n{:07d}\", \"labels\": {{\"network.topology.nvidia.com/leaf\": \"leaf{:05d}\", "
        "\"network.topology.nvidia.com/spine\": \"spine{:03d}\", \"nvidia.com/gpu.count\": \"8\", "
        "\"nvidia.com/gpu.product\": \"NVIDIA-H100-80GB-HBM3\"}}}}}}\n",
        i ? "," : "", i, i / 32, i / 1024);
  }, "]}\n", 1);
}

std::string native_trace() {
  return grow("id,submit_s,gpus,duration_s,tp,pp,dp\n", [](std::size_t i) {
    return fmt::format("job-{:08d},{}.5,8,3600,8,1,1\n", i, i * 10);
  });
}

std::string philly_trace() {
  return grow("[\n", [](std::size_t i) {
    return fmt::format(
        "{}{{\"status\": \"Pass\", \"vc\": \"vc-a\", \"jobid\": \"application_{:010d}\", \"attempts\": [{{\"start_time\": "
        "\"2017-10-03 02:58:08\", \"end_time\": \"2017-10-03 04:58:08\", \"detail\": [{{\"ip\": \"m1\", \"gpus\": "
        "[\"gpu0\", \"gpu1\"]}}]}}], \"submitted_time\": \"2017-10-03 02:58:00\", \"user\": \"u\"}}\n",
        i ? "," : "", i);
  }, "]\n");
}

struct Case {
  const char* name;
  std::function<std::string()> make;
  std::function<bool(const std::string&, std::string&)> read;  // false + message on failure
  bool cluster = false;  // a cluster format: nodes=N sizes it
};

template <class R>
bool ok(const R& r, std::string& why) {
  if (r) return true;
  why = r.error().to_string();
  return false;
}

std::vector<Case> cases() {
  static const Cluster state_cluster = *build_preset("dgx-h100?nodes=4096");
  return {
      {"slurm topology.conf", slurm_conf, [](const std::string& t, std::string& w) { return ok(load_cluster_text(t, "big.conf"), w); }, true},
      {"Topograph model", topograph_model, [](const std::string& t, std::string& w) { return ok(load_cluster_text(t, "big.yaml"), w); }, true},
      {"native spec (YAML)", native_spec, [](const std::string& t, std::string& w) { return ok(load_cluster_text(t, "big.yaml"), w); }, true},
      {"k8s NodeList (JSON)", k8s_nodes, [](const std::string& t, std::string& w) { return ok(read_k8s_nodes(t, "big.json", {}), w); }, true},
      {"k8s NodeList (JSON) into a cluster", k8s_nodes,
       [](const std::string& t, std::string& w) { return ok(load_cluster_text(t, "big.json"), w); }, true},
      {"ibnetdiscover",
       [] {
         IbnetGeneratorSpec s;
         s.scalable_units = 1, s.nodes_per_su = 32;
         std::string out;
         while (out.size() < g_target) {
           s.scalable_units *= 2;
           out = generate_ibnetdiscover(s);
         }
         return out;
       },
       [](const std::string& t, std::string& w) { return ok(read_ibnetdiscover(t, "big.ibnet"), w); }},
      {"native trace (CSV)", native_trace, [](const std::string& t, std::string& w) { return ok(sim::read_native_csv(t, "big.csv"), w); }},
      {"Philly trace (JSON)", philly_trace, [](const std::string& t, std::string& w) { return ok(sim::read_philly(t, "big.json"), w); }},
      {"allocation state (JSON)",
       [] {
         // One job per GPU pair, repeated over the cluster's GPUs under distinct ids until 50 MB:
         // a file that large cannot be valid for one cluster, so the reader stops at the first
         // GPU given twice. Measured: parsing and checking the whole document before that.
         return grow("{\"format\": \"toposched-allocation-state\", \"version\": 1, \"cluster\": \"dgx-h100-4096n\", "
                     "\"gpus\": 32768, \"jobs\": [\n",
                     [](std::size_t i) {
                       return fmt::format("{}{{\"id\": \"job-{:08d}\", \"gpus\": [\"dgx-h100-{:04d}:{}\"]}}\n", i ? "," : "", i,
                                          1 + (i / 8) % 4096, i % 8);
                     },
                     "]}\n");
       },
       [](const std::string& t, std::string& w) {
         auto r = state_from_json(state_cluster, t, "big-state.json");
         if (!r) w = r.error().to_string();
         return true;  // an error is expected (see above); time and memory are what count
       }},
  };
}

// ---- model-only

// The cluster one format's generated input describes, as a shape: `per_leaf` nodes of
// `gpus_per_node` GPUs under each leaf switch, named n<leaf:06>x<k:02>; topology.conf puts
// each leaf under its own spine (a second tier), the Topograph model has a "core" switch
// beside the leaves.
struct ModelCase {
  const char* name;  // the reader row it is the floor of
  std::function<std::string()> make;
  std::string_view leaf_marker;  // occurs once per leaf in the generated input
  int gpus_per_node;
  bool spine_per_leaf;
  bool core;
};

std::vector<ModelCase> model_cases() {
  return {
      {"slurm topology.conf", slurm_conf, "SwitchName=leaf", 8, true, false},
      {"Topograph model", topograph_model, "- switch: leaf", 8, false, true},
      {"native spec (YAML)", native_spec, ", tier: leaf, nodes: ", 1, false, false},
  };
}

std::size_t count_of(std::string_view text, std::string_view marker) {
  std::size_t n = 0;
  for (std::size_t at = text.find(marker); at != std::string_view::npos; at = text.find(marker, at + marker.size())) ++n;
  return n;
}

Cluster build_model(const ModelCase& m, std::size_t leaves) {
  constexpr int kPerLeaf = 32;
  ClusterBuilder b("model");
  NodeType type = *generic_node_type("H100", m.gpus_per_node, 400);
  type.name = "t";
  const NodeTypeId t = b.add_node_type(type);
  const int leaf_tier = b.add_tier(Tier{"leaf"});
  const int spine_tier = m.spine_per_leaf ? b.add_tier(Tier{"spine"}) : -1;
  if (m.core) b.add_switch("core", leaf_tier);
  b.reserve_nodes(leaves * kPerLeaf);  // as the readers' fast paths do
  for (std::size_t i = 0; i < leaves; ++i) {
    const SwitchId leaf = b.add_switch(fmt::format("leaf{:06d}", i), leaf_tier);
    if (m.spine_per_leaf) b.connect(leaf, b.add_switch(fmt::format("spine{:06d}", i), spine_tier));
    for (int k = 0; k < kPerLeaf; ++k) b.attach(b.add_node(fmt::format("n{:06d}x{:02d}", i, k), t), leaf);
  }
  auto c = std::move(b).build();
  if (!c) {
    fmt::print(stderr, "model: {}\n", c.error().to_string());
    std::exit(1);
  }
  return std::move(*c);
}

std::size_t resident_bytes() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

double cpu_seconds();

// One format's floor, in this (child) process: the sample check, then the full model.
void run_model_case(const ModelCase& m) {
  // The shape, against the reader on a small input of the same generator.
  const std::size_t target = g_target, nodes = g_nodes;
  g_nodes = 3200;
  const std::string sample = m.make();
  g_nodes = nodes;
  auto read = load_cluster_text(sample, m.name == std::string("slurm topology.conf") ? "s.conf" : "s.yaml");
  const Cluster mine = build_model(m, count_of(sample, m.leaf_marker));
  if (!read || read->node_count() != mine.node_count() || read->gpu_count() != mine.gpu_count() ||
      read->switch_count() != mine.switch_count() || read->tiers().size() != mine.tiers().size() ||
      read->node_name(NodeId(77)) != mine.node_name(NodeId(77))) {
    fmt::print("| {} | | | | | model differs from the reader's on the sample: {} |\n", m.name,
               read ? fmt::format("{} nodes, {} GPUs, {} switches, {} tiers vs {}, {}, {}, {}", read->node_count(),
                                  read->gpu_count(), read->switch_count(), read->tiers().size(), mine.node_count(),
                                  mine.gpu_count(), mine.switch_count(), mine.tiers().size())
                    : read.error().to_string());
    std::fflush(stdout);
    return;
  }
  g_target = target;
  std::size_t leaves = 0, text_mb = 0;
  {
    const std::string text = m.make();  // only to count what the reader would get; freed before the build
    leaves = count_of(text, m.leaf_marker);
    text_mb = text.size() >> 20;
  }
  const std::size_t before = resident_bytes();
  const double cpu_before = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  const Cluster c = build_model(m, leaves);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu_before;
  const std::size_t model = resident_bytes() - before;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  fmt::print("| model only, as {} ({} MB) | {:.2f} M nodes, {} GPUs each, {} switches, {} tier(s) | {:.2f} s | {:.2f} s | "
             "{:.0f} MB | model {:.0f} MB resident, {:.0f} bytes per node |\n",
             m.name, text_mb, c.node_count() / 1e6, m.gpus_per_node, c.switch_count(), c.tiers().size(), seconds, cpu,
             usage.ru_maxrss / 1024.0, model / 1048576.0, static_cast<double>(model) / static_cast<double>(c.node_count()));
  std::fflush(stdout);
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return sec(usage.ru_utime) + sec(usage.ru_stime);
}

// Generates and reads one case in this (child) process and prints its row.
void run_case(const Case& c) {
  std::string text = c.make();
  const double cpu_before = cpu_seconds();
  auto start = std::chrono::steady_clock::now();
  std::string why;
  bool good = c.read(text, why);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu_before;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  if (why.size() > 80) why = why.substr(0, 77) + "...";
  fmt::print("| {} | {:.1f} MB | {:.2f} s | {:.2f} s | {:.0f} MB | {} |\n", c.name, text.size() / 1048576.0, seconds, cpu,
             usage.ru_maxrss / 1024.0, good && why.empty() ? "read" : good ? "refused as expected: " + why : "ERROR: " + why);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool model_only = false;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "model-only")
      model_only = true;
    else if (arg.starts_with("nodes="))
      g_nodes = static_cast<std::size_t>(std::atol(arg.c_str() + 6));
    else if (arg.starts_with("only="))
      g_only = arg.substr(5);
    else
      g_target = static_cast<std::size_t>(std::atof(arg.c_str()) * (1u << 20));
  }
  if (model_only) {
    fmt::print("| model | what it holds | build time | CPU time | peak memory | model |\n|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    for (const ModelCase& m : model_cases()) {
      if (!g_only.empty() && std::string(m.name).find(g_only) == std::string::npos) continue;
      pid_t pid = fork();
      if (pid == 0) {
        run_model_case(m);
        std::_Exit(0);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status)) fmt::print("| {} | | | | | child died (status {}) |\n", m.name, status);
    }
    return 0;
  }
  fmt::print("| input | size | read time | CPU time | peak memory | result |\n|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (const Case& c : cases()) {
    if (g_nodes && !c.cluster) continue;
    if (!g_only.empty() && std::string(c.name).find(g_only) == std::string::npos) continue;
    pid_t pid = fork();
    if (pid == 0) {
      run_case(c);
      std::_Exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status)) fmt::print("| {} | | | | | child died (status {}) |\n", c.name, status);
  }
  return 0;
}
