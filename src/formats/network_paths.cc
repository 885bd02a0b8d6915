#include "formats/network_paths.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

namespace toposched {

void NetworkPaths::add(std::size_t node, std::vector<std::string> chain) {
  if (!chain.empty()) chains_.push_back({node, std::move(chain)});
}

void NetworkPaths::finish(DiscoveredTopology& out) const {
  std::map<std::pair<int, std::string>, std::size_t> switch_at;  // (tier, id) -> out.switches index
  std::unordered_map<std::string, int> first_tier;                // id -> the tier it was first seen at
  std::size_t depth = 0;
  for (const Chain& c : chains_) {
    const int length = static_cast<int>(c.ids.size());
    depth = std::max(depth, c.ids.size());
    std::string child;  // the id one tier below, within this chain
    for (int i = length - 1; i >= 0; --i) {
      const int tier = length - 1 - i;
      const std::string& id = c.ids[static_cast<std::size_t>(i)];
      auto [it, inserted] = switch_at.try_emplace({tier, id}, out.switches.size());
      if (inserted) {
        auto [seen, fresh] = first_tier.try_emplace(id, tier);
        const bool clash = !fresh && seen->second != tier;
        out.switches.push_back({clash ? fmt::format("{}@tier-{}", id, tier) : id, tier, ""});
      }
      const std::string& name = out.switches[it->second].name;
      if (tier == 0) {
        out.nodes[c.node].switch_name = name;
      } else {
        DiscoveredSwitch& below = out.switches[switch_at.at({tier - 1, child})];
        if (below.parent.empty())
          below.parent = name;
        else if (below.parent != name)
          out.warnings.push_back(fmt::format("{} '{}' puts network node '{}' under '{}', but another {} put it "
                                             "under '{}'; keeping '{}'",
                                             what_, out.nodes[c.node].name, below.name, name, what_, below.parent,
                                             below.parent));
      }
      child = id;
    }
  }
  for (std::size_t t = 0; t < depth; ++t) out.tiers.push_back(tier_name_for_level(static_cast<int>(t)));
}

}  // namespace toposched
