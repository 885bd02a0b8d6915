// Test helpers: an H100 node type, and two leaves of four 8-GPU H100 nodes (NV18, one 400G NIC per GPU) under one
// spine, the leaves' uplinks oversubscribed `leaf_oversubscription`:1. Header-only.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "topology/cluster.h"

namespace toposched::testing {

// A DGX H100-like server: 8 GPUs on NVSwitch (NV18), one 400G NIC per GPU behind its PIX.
inline NodeType h100_node_type() {
  NodeType t;
  t.name = "h100";
  t.gpu_model = "H100-SXM5";
  t.gpu_count = 8;
  t.gpu_links = NodeType::full_nvlink_mesh(8, 18);
  t.nvlink_GBps_per_link = 25;
  t.nvswitch = true;
  t.pcie_GBps = 63;
  for (int k = 0; k < 8; ++k) {
    Nic nic{fmt::format("mlx5_{}", k), 400, {}, -1, true};
    for (int g = 0; g < 8; ++g) nic.gpu_affinity.push_back(g == k ? LinkClass::kPix : LinkClass::kNode);
    t.nics.push_back(nic);
  }
  return t;
}

inline Cluster two_leaves(double leaf_oversubscription) {
  ClusterBuilder b("two-leaves");
  NodeTypeId type = b.add_node_type(h100_node_type());
  int leaf = b.add_tier(Tier{"leaf", 0, 0.5, leaf_oversubscription});
  int spine = b.add_tier(Tier{"spine", 0, 0.5, 1.0});
  SwitchId top = b.add_switch("spine", spine);
  for (int l = 0; l < 2; ++l) {
    SwitchId s = b.add_switch(fmt::format("leaf{}", l), leaf);
    b.connect(s, top);
    for (int n = 0; n < 4; ++n) b.attach(b.add_node(fmt::format("n{}{}", l, n), type), s);
  }
  auto c = std::move(b).build();
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

}  // namespace toposched::testing
