#include "formats/slurm_topology_fast.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "formats/plain_tree.h"
#include "formats/text_scan.h"
#include "topology/hostlist.h"
#include "topology/text.h"

namespace toposched {
namespace {

// One read of one text. Each step returns false where the general path must take the file
// (it would warn, refuse, or read something this path does not).
class FastReader {
 public:
  explicit FastReader(std::string_view text) : text_(text) {}

  bool read() {
    if (!for_each_line(text_, [this](std::string_view line) { return read_line(line); })) return false;
    return tree_.switch_count() > 0 && tree_.node_count() > 0 && link_parents() && tree_.find_heights() &&
           tree_.sort_nodes();
  }

  std::optional<Cluster> build(const DiscoveryOptions& options) const { return tree_.build(options); }

 private:
  // One statement: `SwitchName=NAME` and then Nodes=, Switches= or LinkSpeed= fields.
  bool read_line(std::string_view line) {
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    if (!line.empty() && line.back() == '\\') return false;  // a continuation
    bool head = true;
    std::size_t i = 0;
    while (true) {
      while (i < line.size() && is_ascii_space(line[i])) ++i;
      if (i >= line.size()) return true;
      std::size_t j = i;
      while (j < line.size() && !is_ascii_space(line[j])) ++j;
      const std::string_view token = line.substr(i, j - i);
      i = j;
      const std::size_t eq = token.find('=');
      if (eq == std::string_view::npos || eq == 0) return false;
      const std::string_view key = token.substr(0, eq), value = token.substr(eq + 1);
      if (value.find('"') != std::string_view::npos) return false;  // quoted (the general path strips)
      const bool ok =
          head ? equals_ignoring_ascii_case(key, "switchname") && tree_.add_switch(value) : read_field(key, value);
      if (!ok) return false;
      head = false;
    }
  }

  bool read_field(std::string_view key, std::string_view value) {
    if (equals_ignoring_ascii_case(key, "nodes")) return add_names(value, true);
    if (equals_ignoring_ascii_case(key, "switches")) return add_names(value, false);
    return equals_ignoring_ascii_case(key, "linkspeed");  // a relative weight Slurm alone uses
  }

  // A Nodes= or Switches= hostlist of the current (last) switch. Without brackets, the names
  // are views into the text; with any, expand_hostlist reads the value as the general path
  // does and the names go to the arena.
  bool add_names(std::string_view value, bool nodes) {
    if (value.find_first_of("[]") != std::string_view::npos) {
      auto names = expand_hostlist(value);
      if (!names) return false;
      for (const std::string& n : *names)
        if (!add_name(tree_.arena.add(n), nodes)) return false;
      return true;
    }
    std::size_t start = 0;
    while (true) {
      std::size_t comma = value.find(',', start);
      if (comma == std::string_view::npos) comma = value.size();
      const std::string_view name = value.substr(start, comma - start);
      if (name.empty()) return false;  // expand_hostlist refuses an empty name
      for (char c : name)
        if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c))) return false;
      if (!add_name(name, nodes)) return false;
      if (comma == value.size()) return true;
      start = comma + 1;
    }
  }

  bool add_name(std::string_view name, bool node) {
    const auto sw = static_cast<std::uint32_t>(tree_.switch_count() - 1);
    if (node) return tree_.add_node(name, sw);
    children_.emplace_back(sw, name);
    return true;
  }

  // Each switch's parent, the first listing winning (the general path warns of the others);
  // an unknown child or a switch listing itself is an error there.
  bool link_parents() {
    for (const auto& [s, child] : children_) {
      const auto c = tree_.find_switch(child);
      if (!c || *c == s) return false;
      if (tree_.parent_of(*c) < 0) tree_.set_parent(*c, s);
    }
    return true;
  }

  std::string_view text_;
  PlainTree tree_;  // switches in the order of their SwitchName= lines
  std::vector<std::pair<std::uint32_t, std::string_view>> children_;  // (switch, child name), in file order
};

}  // namespace

std::optional<Cluster> slurm_topology_cluster_fast(std::string_view text, const DiscoveryOptions& options) {
  if (options.strict) return std::nullopt;  // its warnings count there
  FastReader reader(text);
  if (!reader.read()) return std::nullopt;
  return reader.build(options);
}

}  // namespace toposched
