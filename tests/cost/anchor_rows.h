// Test helper: reads tests/data/nccl_busbw.csv (published NCCL measurements) and builds the
// hardware a row describes from published constants only (hardware.h: NVLink per-link rate,
// PCIe generation; the row: GPUs, NVLinks, NICs and their speed). Single-threaded use.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cost/collective.h"
#include "cost/selection.h"
#include "topology/cluster.h"
#include "topology/hardware.h"

namespace toposched::testing {

struct AnchorRow {
  std::string id, gpu_model, intra, collective, algorithm, bytes, metric, unit, source;
  int gpus_per_node = 0, nodes = 0, gpus_used_per_node = 0, nvlinks_per_gpu = 0, nics_per_node = 0;
  double nic_gbit = 0, value = 0, tolerance = 0;
};

inline std::vector<std::string> split_csv_line(const std::string& line, std::size_t fields) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (out.size() + 1 < fields) {
    auto comma = line.find(',', start);
    if (comma == std::string::npos) break;
    out.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
  out.push_back(line.substr(start));  // the last field (source) may contain commas
  return out;
}

inline std::vector<AnchorRow> read_anchor_rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<AnchorRow> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto f = split_csv_line(line, 17);
    if (f.size() != 17) continue;
    AnchorRow r;
    r.id = f[0];
    r.gpu_model = f[1];
    r.gpus_per_node = std::stoi(f[2]);
    r.nodes = std::stoi(f[3]);
    r.gpus_used_per_node = std::stoi(f[4]);
    r.intra = f[5];
    r.nvlinks_per_gpu = std::stoi(f[6]);
    r.nics_per_node = std::stoi(f[7]);
    r.nic_gbit = std::stod(f[8]);
    r.collective = f[9];
    r.algorithm = f[10];
    r.bytes = f[11];
    r.metric = f[12];
    r.value = std::stod(f[13]);
    r.unit = f[14];
    r.tolerance = std::stod(f[15]);
    r.source = f[16];
    rows.push_back(r);
  }
  return rows;
}

// The row's hardware: `nodes` servers of `gpus_per_node` GPUs on NVSwitch (or PCIe), each
// NIC next to GPU k * gpus / nics (PIX), every node under one leaf switch.
inline Result<Cluster> build_anchor_cluster(const AnchorRow& r) {
  auto product = find_gpu_product(r.gpu_model);
  if (!product) return make_error(ErrorCode::kNotFound, "unknown GPU model " + r.gpu_model);
  NodeType t;
  t.name = "anchor";
  t.gpu_model = std::string(product->canonical);
  t.gpu_memory_gb = product->memory_gb;
  t.gpu_count = r.gpus_per_node;
  if (r.intra == "nvswitch") {
    t.gpu_links = NodeType::full_nvlink_mesh(r.gpus_per_node, r.nvlinks_per_gpu);
    t.nvlink_GBps_per_link = product->nvlink_GBps_per_link;
    t.nvswitch = true;
  } else {
    t.gpu_links.assign(static_cast<std::size_t>(r.gpus_per_node * r.gpus_per_node), {LinkClass::kPxb, 0});
    for (int g = 0; g < r.gpus_per_node; ++g)
      t.gpu_links[static_cast<std::size_t>(g * r.gpus_per_node + g)] = {LinkClass::kSelf, 0};
  }
  t.pcie_GBps = pcie_GBps(product->pcie_gen, 16);
  for (int k = 0; k < r.nics_per_node; ++k) {
    Nic nic;
    nic.name = fmt::format("mlx5_{}", k);
    nic.gbit = r.nic_gbit;
    int home = k * r.gpus_per_node / r.nics_per_node;
    for (int g = 0; g < r.gpus_per_node; ++g)
      nic.gpu_affinity.push_back(g == home ? LinkClass::kPix : LinkClass::kNode);
    t.nics.push_back(nic);
  }
  ClusterBuilder b("anchor-" + r.id);
  NodeTypeId type = b.add_node_type(std::move(t));
  int tier = b.add_tier(Tier{"leaf", 0, 0.5, 1.0});
  SwitchId leaf = b.add_switch("leaf", tier);
  for (int n = 0; n < r.nodes; ++n) b.attach(b.add_node(fmt::format("node{:02}", n + 1), type), leaf);
  return std::move(b).build();
}

// The row's GPUs: the first `gpus_used_per_node` GPUs of every node, node by node.
inline std::vector<GpuId> anchor_gpus(const Cluster& c, const AnchorRow& r) {
  std::vector<GpuId> out;
  for (std::uint32_t n = 0; n < c.node_count(); ++n)
    for (int i = 0; i < r.gpus_used_per_node; ++i) out.push_back(c.node_gpu(NodeId(n), i));
  return out;
}

struct AnchorPrediction {
  CollectiveEstimate estimate;
  double predicted = 0;  // in the row's metric and unit
};

inline Result<AnchorPrediction> predict_anchor(const AnchorRow& r) {
  auto cluster = build_anchor_cluster(r);
  if (!cluster) return tl::unexpected(cluster.error());
  auto coll = parse_collective(r.collective);
  auto algo = parse_algorithm(r.algorithm);
  auto bytes = parse_size(r.bytes);
  if (!coll || !algo || !bytes) return make_error(ErrorCode::kParse, "bad anchor row " + r.id);
  auto gpus = anchor_gpus(*cluster, r);
  auto est = estimate_collective(*cluster, gpus, *coll, *bytes, *algo);
  if (!est) return tl::unexpected(est.error());
  AnchorPrediction p{*est, r.metric == "busbw" ? est->busbw_GBps : est->time_us};
  return p;
}

}  // namespace toposched::testing
