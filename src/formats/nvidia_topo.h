// Reader for `nvidia-smi topo -m`: the GPU/NIC matrix of one node, as a NodeType.
//
// Accepts both layouts (NICs as `NIC#` columns explained by a "NIC Legend", or named by
// device such as `mlx5_0`), tab- or space-separated columns, the ` X ` self cell, `NV#`
// (bonded NVLink count), PIX/PXB/PHB/NODE/SYS, and the optional "CPU Affinity",
// "NUMA Affinity" and "GPU NUMA ID" columns. Partial NVLink meshes (hybrid cube-mesh) are
// kept as they are. An unknown cell is an error naming row, column, token and file:line:col.
// `topo -m` does not name the GPU: its model comes from the options, else it is inferred
// from the NVLink count per GPU (infer_gpu_model), with a warning that names the inference.
// Pure function; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

struct TopoMatrixOptions {
  // GPU product (find_gpu_product); gives memory, PCIe generation and NVLink per-link speed.
  // Empty: inferred from the matrix (infer_gpu_model), H100 when it cannot tell; either way
  // a warning says what was assumed.
  std::string gpu_model;
  // Overrides the product's NVLink bandwidth per link (GB/s per direction) when > 0.
  double nvlink_GBps_per_link = 0;
  // Line rate given to every NIC (topo -m does not show it), Gbit/s.
  double nic_gbit = 400;
  // When set, NICs whose device name does not fully match are marked compute: false.
  std::optional<std::string> compute_nic_regex;
};

struct TopoMatrix {
  NodeType type;                      // name left empty; the caller names node types
  std::vector<std::string> warnings;  // e.g. a NIC column without a legend entry
};

// The GPU generation a GPU x GPU NVLink matrix implies (row-major, n x n bonded link
// counts, 0 = no NVLink), from the NVLinks each GPU has: on an NVSwitch board every pair
// shows all of a GPU's links (NV18 on H100, NV12 on A100, NV6 on a DGX-2's V100); on a
// direct mesh they add up over the GPU's peers (a DGX-1V's hybrid cube-mesh: NV1 + NV1 +
// NV2 + NV2 = 6). 18 -> H100 (H200 and B200 look alike), 12 -> A100, 6 -> V100.
struct GpuModelGuess {
  std::string model;   // "" when the matrix does not tell (no NVLink, or an unknown count)
  int links_per_gpu = 0;
  std::string reason;  // for the warning, e.g. "18 NVLinks per GPU (NV18 to every peer)"
};
GpuModelGuess infer_gpu_model(const std::vector<int>& nvlinks, int gpus);

Result<TopoMatrix> read_nvidia_topo(std::string_view text, const std::string& file,
                                    const TopoMatrixOptions& options = {});

// True when the text looks like `topo -m` output (a header line with GPU0 and a GPU0 row).
bool looks_like_nvidia_topo(std::string_view text);

}  // namespace toposched
