#include "formats/plain_tree.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace toposched {

std::string_view NameArena::add(std::string_view s) {
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  if (chunks_.empty() || chunks_.back().capacity() - chunks_.back().size() < s.size()) {
    chunks_.emplace_back();
    chunks_.back().reserve(std::max(kChunk, s.size()));  // beyond the inline buffer: a move keeps it
  }
  std::string& chunk = chunks_.back();
  const std::size_t at = chunk.size();
  chunk.append(s);
  return {chunk.data() + at, s.size()};
}

bool PlainTree::add_switch(std::string_view name) {
  if (name.empty() || switch_names_.size() >= std::numeric_limits<std::uint32_t>::max()) return false;
  if (!switch_index_.emplace(name, static_cast<std::uint32_t>(switch_names_.size())).second) return false;
  switch_names_.push_back(name);
  parent_.push_back(-1);
  return true;
}

std::optional<std::uint32_t> PlainTree::find_switch(std::string_view name) const {
  auto it = switch_index_.find(name);
  if (it == switch_index_.end()) return std::nullopt;
  return it->second;
}

bool PlainTree::add_node(std::string_view name, std::uint32_t sw) {
  if (name.size() >= std::numeric_limits<std::uint32_t>::max()) return false;
  nodes_.push_back({name.data(), static_cast<std::uint32_t>(name.size()), sw});
  return true;
}

void PlainTree::remap_node_switches(const std::vector<std::uint32_t>& switch_of) {
  for (NodeRec& n : nodes_) n.sw = switch_of[n.sw];
}

int& PlainTree::parent_of(std::uint32_t s) { return parent_[s]; }

bool PlainTree::find_heights() {
  const std::size_t n = switch_names_.size();
  height_.assign(n, 0);
  max_height_ = 0;
  std::vector<int> pending(n, 0);
  for (int p : parent_)
    if (p >= 0) ++pending[static_cast<std::size_t>(p)];
  std::vector<std::size_t> queue;
  for (std::size_t s = 0; s < n; ++s)
    if (pending[s] == 0) queue.push_back(s);
  for (std::size_t done = 0; done < queue.size(); ++done) {
    const std::size_t s = queue[done];
    max_height_ = std::max(max_height_, height_[s]);
    if (parent_[s] < 0) continue;
    const auto p = static_cast<std::size_t>(parent_[s]);
    height_[p] = std::max(height_[p], height_[s] + 1);
    if (--pending[p] == 0) queue.push_back(p);
  }
  return queue.size() == n;
}

bool PlainTree::sort_nodes() {
  auto less = [](const NodeRec& a, const NodeRec& b) { return natural_less(a.view(), b.view()); };
  auto strictly_sorted = [&] {
    for (std::size_t i = 1; i < nodes_.size(); ++i)
      if (!less(nodes_[i - 1], nodes_[i])) return false;
    return true;
  };
  if (strictly_sorted()) return true;  // a generated file usually is: no sort
  std::sort(nodes_.begin(), nodes_.end(), less);
  return strictly_sorted();
}

// As merge_discovered: the type, then tiers and switches (add_fabric), then the nodes
// (add_nodes), each attached to its switch.
std::optional<Cluster> PlainTree::build(const DiscoveryOptions& options) const {
  auto type = hintless_node_type(options);
  if (!type) return std::nullopt;
  ClusterBuilder b(options.cluster_name);
  const NodeTypeId t = b.add_node_type(std::move(*type));
  if (!switch_names_.empty())
    for (int h = 0; h <= max_height_; ++h) b.add_tier(Tier{tier_name_for_level(h)});
  std::vector<SwitchId> ids;
  ids.reserve(switch_names_.size());
  for (std::size_t s = 0; s < switch_names_.size(); ++s)
    ids.push_back(b.add_switch(std::string(switch_names_[s]), height_[s]));
  for (std::size_t s = 0; s < switch_names_.size(); ++s)
    if (parent_[s] >= 0) b.connect(ids[s], ids[static_cast<std::size_t>(parent_[s])]);
  b.reserve_nodes(nodes_.size());
  for (const NodeRec& n : nodes_) b.attach(b.add_node(std::string(n.view()), t), ids[n.sw]);
  auto cluster = std::move(b).build();
  if (!cluster) return std::nullopt;
  return std::move(*cluster);
}

}  // namespace toposched
