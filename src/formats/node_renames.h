// NodeRenames: the names discovery gives nodes that a source names otherwise. Cloud APIs name
// a host by its instance (AWS `i-0abc...`, an OCI instance OCID) where the scheduler and the
// per-node files use its host name; renaming before the merge makes both one node.
//
// Two inputs: a YAML/JSON mapping {NAME IN A SOURCE: NODE NAME} (`discover --node-names`), and
// pdsh's output of each host's instance-id query, "NODE: INSTANCE-ID" per line
// (`discover --instance-ids`: `pdsh -w HOSTS 'curl -s http://169.254.169.254/latest/meta-data/
// instance-id'`, NVIDIA Topograph's way of mapping instances to nodes). Invariants: a source
// name maps to one node name; a node name is non-empty and holds no space, ',', '[' or ']'
// (hostlist syntax). Not thread-safe; one per discover call.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "formats/discovered.h"
#include "topology/error.h"

namespace toposched {

class NodeRenames {
 public:
  // A YAML/JSON mapping {source name: node name}.
  Result<void> add_mapping(std::string_view text, const std::string& file);
  // pdsh lines "NODE: INSTANCE-ID": the instance is renamed to the node.
  Result<void> add_instance_ids(std::string_view text, const std::string& file);

  bool empty() const { return to_.empty(); }

  // Renames the nodes of every source; two nodes of one source renamed to one name is an
  // error. Source names no source has are reported in `warnings`.
  Result<void> apply(std::vector<DiscoveredTopology>& sources, std::vector<std::string>& warnings) const;

 private:
  struct Target {
    std::string name;
    SourceLocation at;  // where the rename was read
  };
  Result<void> add(const std::string& from, const std::string& to, const SourceLocation& at);

  std::map<std::string, Target> to_;
};

}  // namespace toposched
