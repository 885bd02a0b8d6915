#include "formats/discover.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "formats/aws_topology.h"
#include "formats/gcp_instances.h"
#include "formats/ibnetdiscover.h"
#include "formats/k8s_nodes.h"
#include "formats/node_renames.h"
#include "formats/nvidia_fabric.h"
#include "formats/nvidia_gpu_query.h"
#include "formats/oci_topology.h"
#include "formats/resource_slices.h"
#include "formats/slurm_topology.h"
#include "formats/topograph_model.h"
#include "topology/file_io.h"
#include "topology/hostlist.h"

namespace toposched {
namespace {

namespace fs = std::filesystem;

// Files of a per-node argument: the file itself, or the regular files of a directory.
Result<std::vector<std::string>> per_node_files(const std::string& arg, std::string_view option) {
  std::error_code ec;
  if (!fs::exists(arg, ec))
    return make_error(ErrorCode::kNotFound, fmt::format("{} {}: no such file or directory", option, arg));
  if (!fs::is_directory(arg, ec)) return std::vector<std::string>{arg};
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(arg, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".") || !entry.is_regular_file(ec)) continue;
    files.push_back(entry.path().string());
  }
  if (ec) return make_error(ErrorCode::kIo, fmt::format("{} {}: cannot list: {}", option, arg, ec.message()));
  std::sort(files.begin(), files.end(), natural_less);
  if (files.empty())
    return make_error(ErrorCode::kNotFound, fmt::format("{} {}: the directory holds no files", option, arg));
  return files;
}

// --gpu-info files: node name -> what nvidia-smi named its GPUs.
Result<std::map<std::string, NodeGpuQuery>> read_gpu_info(const std::vector<std::string>& args) {
  std::map<std::string, NodeGpuQuery> out;
  for (const auto& arg : args) {
    TOPOSCHED_TRY(files, per_node_files(arg, "--gpu-info"));
    for (const auto& f : files) {
      TOPOSCHED_TRY(text, read_text_file(f));
      TOPOSCHED_TRY(q, read_nvidia_gpu_query(text, f));
      if (!out.emplace(fs::path(f).stem().string(), std::move(q)).second)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("--gpu-info: two files are named after node '{}'", fs::path(f).stem().string()),
                          SourceLocation{f, 0, 0});
    }
  }
  return out;
}

// Nodes that --gpu-info describes but no topo -m does: their GPU model and count as hints.
DiscoveredTopology gpu_info_hints(std::map<std::string, NodeGpuQuery>& info, const std::vector<std::string>& used) {
  DiscoveredTopology t;
  t.source = "--gpu-info";
  for (auto& [node, q] : info) {
    for (auto& w : q.warnings) t.warnings.push_back(std::move(w));
    if (std::find(used.begin(), used.end(), node) != used.end()) continue;
    DiscoveredNode n;
    n.name = node;
    n.gpu_model = q.product;
    n.gpu_count = q.gpus;
    t.nodes.push_back(std::move(n));
  }
  return t;
}

// One node's `topo -m` file into `hw`, with the GPU model from --gpu-info where given.
Result<void> read_topo_m_file(const std::string& f, const DiscoverRequest& r,
                              const std::map<std::string, NodeGpuQuery>& gpu_info,
                              std::vector<std::string>& gpu_info_used, std::unordered_map<std::string, int>& topo_gpus,
                              DiscoveredTopology& hw) {
  TOPOSCHED_TRY(text, read_text_file(f));
  DiscoveredNode n;
  n.name = node_name_from_path(f);
  TopoMatrixOptions topo = r.topo;
  auto info = gpu_info.find(n.name);
  if (topo.gpu_model.empty() && info != gpu_info.end()) {
    topo.gpu_model = info->second.product;
    gpu_info_used.push_back(n.name);
  }
  TOPOSCHED_TRY(m, read_nvidia_topo(text, f, topo));
  if (info != gpu_info.end() && info->second.gpus != m.type.gpu_count)
    hw.warnings.push_back(fmt::format("{}: node '{}': --gpu-info lists {} GPUs but its topo -m has {}", f, n.name,
                                      info->second.gpus, m.type.gpu_count));
  if (std::any_of(hw.nodes.begin(), hw.nodes.end(), [&](const DiscoveredNode& x) { return x.name == n.name; }))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--topo-m: two files are named after node '{}'", n.name),
                      SourceLocation{f, 0, 0});
  for (const auto& w : m.warnings) hw.warnings.push_back(f + ": " + w);
  topo_gpus[n.name] = m.type.gpu_count;
  n.hardware = std::make_shared<const NodeType>(std::move(m.type));
  hw.nodes.push_back(std::move(n));
  return {};
}

// The node hardware sources: --gpu-info hints, then every `topo -m` file. Records each
// node's GPU count from its `topo -m` in topo_gpus.
Result<void> add_hardware_sources(const DiscoverRequest& r, std::unordered_map<std::string, int>& topo_gpus,
                                  std::vector<DiscoveredTopology>& sources) {
  TOPOSCHED_TRY(gpu_info, read_gpu_info(r.gpu_info));
  std::vector<std::string> gpu_info_used;
  DiscoveredTopology hw;
  hw.source = "topo -m";
  for (const auto& arg : r.topo_m) {
    TOPOSCHED_TRY(files, per_node_files(arg, "--topo-m"));
    for (const auto& f : files) TOPOSCHED_CHECK(read_topo_m_file(f, r, gpu_info, gpu_info_used, topo_gpus, hw));
  }
  if (!gpu_info.empty()) {
    DiscoveredTopology hints = gpu_info_hints(gpu_info, gpu_info_used);
    if (!hints.nodes.empty() || !hints.warnings.empty()) sources.push_back(std::move(hints));
  }
  if (!hw.nodes.empty() || !hw.warnings.empty()) {
    // Warnings already carry their file; merge_discovered prefixes the source name.
    hw.source.clear();
    sources.push_back(std::move(hw));
  }
  return {};
}

// The --fabric files (nvidia-smi's fabric state per node): each node's NVLink domain.
Result<void> add_nvlink_fabric_source(const DiscoverRequest& r, const std::unordered_map<std::string, int>& topo_gpus,
                                      std::vector<DiscoveredTopology>& sources) {
  DiscoveredTopology fab;
  std::map<std::string, std::vector<std::string>> fabric_notes;  // warning -> nodes, to report each once
  for (const auto& arg : r.fabric) {
    TOPOSCHED_TRY(files, per_node_files(arg, "--fabric"));
    for (const auto& f : files) {
      TOPOSCHED_TRY(text, read_text_file(f));
      TOPOSCHED_TRY(nf, read_nvidia_fabric(text, f));
      DiscoveredNode n;
      n.name = node_name_from_path(f);
      for (const auto& w : nf.warnings) fabric_notes[w].push_back(n.name);
      if (auto it = topo_gpus.find(n.name); it != topo_gpus.end() && it->second != nf.gpus)
        fab.warnings.push_back(
            fmt::format("{}: node '{}': reports {} GPUs but its topo -m has {}", f, n.name, nf.gpus, it->second));
      n.domain = nf.domain;
      fab.nodes.push_back(std::move(n));
    }
  }
  for (auto& [note, nodes] : fabric_notes) {
    std::sort(nodes.begin(), nodes.end(), natural_less);
    fab.warnings.push_back(fmt::format("{} node(s): {}: {}", nodes.size(), compress_hostlist(nodes), note));
  }
  if (!fab.nodes.empty()) {
    fab.source = "--fabric";
    sources.push_back(std::move(fab));
  }
  return {};
}

// OCI's rdmaTopologyData, one file per host or pdsh's lines for many: one source for all.
Result<void> add_oci_rdma_source(const DiscoverRequest& r, std::vector<DiscoveredTopology>& sources) {
  if (r.oci_rdma_topology.empty()) return {};
  OciRdmaTopology hosts;
  for (const auto& arg : r.oci_rdma_topology) {
    TOPOSCHED_TRY(files, per_node_files(arg, "--oci-rdma-topology"));
    for (const auto& f : files) {
      TOPOSCHED_TRY(text, read_text_file(f));
      TOPOSCHED_CHECK(hosts.add(text, f, node_name_from_path(f)));
    }
  }
  sources.push_back(hosts.finish("--oci-rdma-topology"));
  return {};
}

// --node-names and --instance-ids: every source's nodes renamed before the merge, so that a
// cloud's instance ids and the hosts' own files name one node. Its warnings join the merge as
// a source of their own (reported, and refused with --strict, as every source's are).
Result<void> rename_nodes(const DiscoverRequest& r, std::vector<DiscoveredTopology>& sources) {
  NodeRenames renames;
  for (const auto& f : r.node_name_maps) {
    TOPOSCHED_TRY(text, read_text_file(f));
    TOPOSCHED_CHECK(renames.add_mapping(text, f));
  }
  for (const auto& f : r.instance_ids) {
    TOPOSCHED_TRY(text, read_text_file(f));
    TOPOSCHED_CHECK(renames.add_instance_ids(text, f));
  }
  if (renames.empty()) return {};
  DiscoveredTopology notes;
  notes.source = "--node-names/--instance-ids";
  TOPOSCHED_CHECK(renames.apply(sources, notes.warnings));
  if (!notes.warnings.empty()) sources.push_back(std::move(notes));
  return {};
}

// Whole-cluster sources, one file each: ibnetdiscover, topology.conf, Topograph models,
// Kubernetes node lists, AWS instance topology, Google Compute Engine instances, OCI compute
// hosts.
Result<void> add_cluster_sources(const DiscoverRequest& r, std::vector<DiscoveredTopology>& sources) {
  auto each = [&](const std::vector<std::string>& files, auto&& read) -> Result<void> {
    for (const auto& f : files) {
      TOPOSCHED_TRY(text, read_text_file(f));
      TOPOSCHED_TRY(t, read(text, f));
      sources.push_back(std::move(t));
    }
    return {};
  };
  IbnetOptions ib;
  ib.hca_regex = r.hca_regex;
  TOPOSCHED_CHECK(each(r.ibnetdiscover, [&](const std::string& t, const std::string& f) -> Result<DiscoveredTopology> {
    TOPOSCHED_TRY(res, read_ibnetdiscover(t, f, ib));
    return std::move(res.topology);
  }));
  TOPOSCHED_CHECK(
      each(r.slurm_topology, [](const std::string& t, const std::string& f) { return read_slurm_topology(t, f); }));
  TOPOSCHED_CHECK(
      each(r.topograph_models, [](const std::string& t, const std::string& f) { return read_topograph_model(t, f); }));
  TOPOSCHED_CHECK(
      each(r.k8s_nodes, [&](const std::string& t, const std::string& f) { return read_k8s_nodes(t, f, r.label_map); }));
  TOPOSCHED_CHECK(
      each(r.aws_topology, [](const std::string& t, const std::string& f) { return read_aws_topology(t, f); }));
  TOPOSCHED_CHECK(
      each(r.gcp_instances, [](const std::string& t, const std::string& f) { return read_gcp_instances(t, f); }));
  TOPOSCHED_CHECK(
      each(r.oci_compute_hosts, [](const std::string& t, const std::string& f) { return read_oci_compute_hosts(t, f); }));
  return {};
}

// Kubernetes ResourceSlices, one file each: each node's GPUs (count, product, PCIe layout).
// A node whose `topo -m` counts other GPUs is named in a warning (its `topo -m` wins).
Result<void> add_resource_slices(const DiscoverRequest& r, const std::unordered_map<std::string, int>& topo_gpus,
                                 std::vector<DiscoveredTopology>& sources) {
  for (const auto& f : r.resource_slices) {
    TOPOSCHED_TRY(text, read_text_file(f));
    TOPOSCHED_TRY(t, read_resource_slices(text, f));
    for (const DiscoveredNode& n : t.nodes)
      if (auto it = topo_gpus.find(n.name); it != topo_gpus.end() && it->second != n.gpu_count)
        t.warnings.push_back(fmt::format("node '{}': its slices list {} GPUs but its topo -m has {}", n.name,
                                         n.gpu_count, it->second));
    sources.push_back(std::move(t));
  }
  return {};
}

}  // namespace

std::string node_name_from_path(const std::string& path) { return fs::path(path).stem().string(); }

Result<DiscoveryResult> discover(const DiscoverRequest& r) {
  std::vector<DiscoveredTopology> sources;
  std::unordered_map<std::string, int> topo_gpus;  // node -> GPUs in its topo -m
  TOPOSCHED_CHECK(add_hardware_sources(r, topo_gpus, sources));
  TOPOSCHED_CHECK(add_nvlink_fabric_source(r, topo_gpus, sources));
  TOPOSCHED_CHECK(add_cluster_sources(r, sources));
  TOPOSCHED_CHECK(add_oci_rdma_source(r, sources));
  TOPOSCHED_CHECK(add_resource_slices(r, topo_gpus, sources));
  for (const DiscoveredTopology& t : r.read_sources) sources.push_back(t);
  TOPOSCHED_CHECK(rename_nodes(r, sources));
  DiscoveryOptions merge = r.merge;
  merge.default_nic_gbit = r.topo.nic_gbit;
  if (!r.topo.gpu_model.empty()) merge.default_gpu_model = r.topo.gpu_model;
  return merge_discovered(std::move(sources), merge);
}

}  // namespace toposched
