// Writer for Slurm's topology.conf, topology/tree plugin: one `SwitchName=` line per switch
// with `Nodes=` (leaf) or `Switches=` (above), compressed hostlists, optional `LinkSpeed=`,
// and a header comment naming the generator. Switch names are made valid for Slurm
// (NameMap::Target::kSlurm); Slurm refuses a switch with both nodes and child switches, so
// such a switch's own nodes move to a synthetic child "<name>-nodes" (reported as a
// warning), and switches with no node below them are left out; a cluster with no switch
// left is a kValidation error. Pure function; thread-safe.
#pragma once

#include "formats/export_common.h"

namespace toposched {

// One switch as written: Slurm name, level as Slurm computes it (leaf 0, parent = highest
// child + 1), and its direct children. Shared with the slurm-yaml writer.
struct SlurmSwitch {
  std::string name;
  std::string model_name;             // the switch's name in the model ("" if synthetic)
  int level = 0;
  std::vector<std::string> switches;  // Slurm names of child switches
  std::vector<std::string> nodes;     // node names, for leaf switches
  double link_GBps = 0;               // per-node uplink bandwidth of its tier; 0 = unknown
};
struct SlurmTree {
  std::vector<SlurmSwitch> switches;  // leaves first, then each level up, in model order
  std::vector<std::pair<std::string, std::string>> renamed;
  std::vector<std::string> warnings;
};
SlurmTree slurm_tree(const Cluster& cluster);

// Topograph's switch-name shortener (topology.ClusterTopology.Normalize): model switch
// name -> "switch.LEVEL.N", LEVEL 1 at the leaves, N counting in the order of the nodes
// sorted by their switch chains.
std::map<std::string, std::string> short_switch_names(const Cluster& cluster);

// Reads ExportOptions::skeleton_only (no Nodes=; a switch left with nothing to say is not
// written, as Topograph does) and name_shortener (short names, each switch line preceded by
// "# switch.L.N=<model name>", as Topograph writes them).
Result<ExportOutput> write_slurm_tree(const Cluster& cluster, const ExportOptions& options);

}  // namespace toposched
