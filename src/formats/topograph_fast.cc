#include "formats/topograph_fast.h"

#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "formats/plain_tree.h"
#include "formats/plain_yaml.h"
#include "formats/text_scan.h"
#include "topology/hostlist.h"

namespace toposched {
namespace {

using plain_yaml::flow_list;
using plain_yaml::hostlist_text;
using plain_yaml::kNone;
using plain_yaml::plain_line;
using plain_yaml::plain_name;
using plain_yaml::split_key;
using plain_yaml::trim_spaces;

// One read of one text, line by line. Each step returns false where the general path must
// take the file.
class TopographFastReader {
 public:
  explicit TopographFastReader(std::string_view text) : text_(text) {}

  bool read() {
    const bool all_read = for_each_line(text_, [this](std::string_view line) {
      std::size_t indent = 0;
      while (indent < line.size() && line[indent] == ' ') ++indent;
      std::string_view c = line.substr(indent);
      while (!c.empty() && c.back() == ' ') c.remove_suffix(1);
      if (c.empty() || c[0] == '#') return true;  // a blank line or a whole-line comment
      return plain_line(c) && read_line(indent, c);
    });
    return all_read && end_switch() && end_block() && finish();
  }

  std::optional<Cluster> build(const DiscoveryOptions& options) const { return tree_.build(options); }

 private:
  enum class Section { kNone, kSwitches, kBlocks };

  bool read_line(std::size_t indent, std::string_view c) {
    if (indent == 0 && !c.starts_with("- ")) return top_key(c);
    if (section_ == Section::kSwitches) return switch_line(indent, c);
    if (section_ == Section::kBlocks) return block_line(indent, c);
    return false;
  }

  bool top_key(std::string_view c) {
    if (!end_switch() || !end_block()) return false;
    if (c == "switches:" && !seen_switches_) {
      seen_switches_ = true;
      section_ = Section::kSwitches;
      return true;
    }
    if (c == "blocks:" && !seen_blocks_) {
      seen_blocks_ = true;
      section_ = Section::kBlocks;
      return true;
    }
    return false;
  }

  // `  NAME: {}`, `  NAME:`, then `    switches: [..]` or `    switches:` and `- A` lines.
  bool switch_line(std::size_t indent, std::string_view c) {
    std::string_view key, value;
    if (indent == 2) {
      if (!end_switch() || !split_key(c, key, value) || !tree_.add_switch(key)) return false;
      body_open_ = value.empty();
      return body_open_ || value == "{}";
    }
    if (!body_open_) return false;
    if (child_items_ && c.starts_with("- ") && (indent == 4 || indent == 6)) {
      if (child_indent_ != kNone && indent != child_indent_) return false;
      child_indent_ = indent;
      ++child_count_;
      return add_child(trim_spaces(c.substr(2)), false);
    }
    if (indent != 4 || child_items_ || body_has_switches_ || !split_key(c, key, value) || key != "switches")
      return false;
    body_has_switches_ = true;
    if (!value.empty()) return flow_list(value, [&](std::string_view t, bool quoted) { return add_child(t, quoted); });
    child_items_ = true;
    child_indent_ = kNone;
    child_count_ = 0;
    return true;
  }

  bool add_child(std::string_view name, bool quoted) {
    if (quoted || !plain_name(name)) return false;
    children_.emplace_back(static_cast<std::uint32_t>(tree_.switch_count() - 1), name);
    return true;
  }

  // The current switch ends; `switches:` with no items is null there (an error).
  bool end_switch() {
    const bool ok = !child_items_ || child_count_ > 0;
    body_open_ = body_has_switches_ = child_items_ = false;
    return ok;
  }

  // `- KEY: VALUE` starts a block; `  KEY: VALUE` goes on; `- N` lines are its nodes.
  bool block_line(std::size_t indent, std::string_view c) {
    if (c.starts_with("- ")) {
      if (block_indent_ == kNone && (indent == 0 || indent == 2)) block_indent_ = indent;
      if (indent == block_indent_) {
        if (!end_block() || c.size() < 3 || c[2] == ' ') return false;
        in_block_ = true;
        block_switch_ = {};
        has_switch_ = has_nodes_ = has_name_ = false;
        block_names_ = 0;
        return block_key(c.substr(2));
      }
      if (!in_block_ || !node_items_) return false;
      if (node_indent_ == kNone && (indent == block_indent_ + 2 || indent == block_indent_ + 4)) node_indent_ = indent;
      if (indent != node_indent_) return false;
      ++node_count_;
      const std::string_view item = trim_spaces(c.substr(2));
      if (item.size() >= 2 && item.front() == '"' && item.back() == '"')
        return add_nodes(item.substr(1, item.size() - 2), true);
      return add_nodes(item, false);
    }
    if (!in_block_ || indent != block_indent_ + 2 || !end_node_items()) return false;
    return block_key(c);
  }

  bool block_key(std::string_view c) {
    std::string_view key, value;
    if (!split_key(c, key, value)) return false;
    if (key == "switch" && !has_switch_ && plain_name(value)) {
      has_switch_ = true;
      block_switch_ = value;
      return true;
    }
    if (key == "name" && !has_name_ && plain_name(value)) return has_name_ = true;
    if (key != "nodes" || has_nodes_) return false;
    has_nodes_ = true;
    if (!value.empty()) return flow_list(value, [&](std::string_view t, bool quoted) { return add_nodes(t, quoted); });
    node_items_ = true;
    node_indent_ = kNone;
    node_count_ = 0;
    return true;
  }

  // One item of a block's nodes, under the block (its switch is resolved in finish()).
  bool add_nodes(std::string_view item, bool quoted) {
    if (!hostlist_text(item, quoted)) return false;
    const auto block = static_cast<std::uint32_t>(block_switches_.size());
    if (item.find_first_of("[],") == kNone) return ++block_names_ <= kMaxHostlistNames && tree_.add_node(item, block);
    auto names = expand_hostlist(item);
    if (!names) return false;
    block_names_ += names->size();
    if (block_names_ > kMaxHostlistNames) return false;
    for (const std::string& n : *names)
      if (!tree_.add_node(tree_.arena.add(n), block)) return false;
    return true;
  }

  // `nodes:` with no items is null there (an error).
  bool end_node_items() {
    const bool ok = !node_items_ || node_count_ > 0;
    node_items_ = false;
    return ok;
  }

  bool end_block() {
    if (!in_block_) return true;
    in_block_ = false;
    if (!end_node_items() || !has_switch_ || !has_nodes_) return false;
    block_switches_.push_back(block_switch_);
    return true;
  }

  bool finish();

  std::string_view text_;
  PlainTree tree_;  // nodes' switch indices are block indices until finish()
  Section section_ = Section::kNone;
  bool seen_switches_ = false, seen_blocks_ = false;
  // The switch being read: whether `NAME:` opened a body, it had `switches`, and `- A`
  // lines of that key are being read (at child_indent_, child_count_ of them so far).
  bool body_open_ = false, body_has_switches_ = false, child_items_ = false;
  std::size_t child_indent_ = kNone, child_count_ = 0;
  std::vector<std::pair<std::uint32_t, std::string_view>> children_;  // (switch, child), in file order
  // The block being read, likewise.
  std::size_t block_indent_ = kNone;
  bool in_block_ = false, has_switch_ = false, has_nodes_ = false, has_name_ = false, node_items_ = false;
  std::string_view block_switch_;
  std::size_t node_indent_ = kNone, node_count_ = 0, block_names_ = 0;
  std::vector<std::string_view> block_switches_;  // per block read
};

// As read_topograph_model: switches named only as children exist (after the defined ones,
// in the order named); a switch under two parents is an error; a block's switch must
// exist. Then heights, each node under its block's switch, natural order.
bool TopographFastReader::finish() {
  if (!seen_blocks_ || block_switches_.empty() || tree_.node_count() == 0) return false;
  for (const auto& [s, child] : children_)
    if (!tree_.find_switch(child) && !tree_.add_switch(child)) return false;
  for (const auto& [s, child] : children_) {
    const std::uint32_t c = *tree_.find_switch(child);
    if (tree_.parent_of(c) >= 0 && tree_.parent_of(c) != static_cast<int>(s)) return false;
    tree_.set_parent(c, s);
  }
  if (!tree_.find_heights()) return false;
  std::vector<std::uint32_t> switch_of_block;
  switch_of_block.reserve(block_switches_.size());
  for (std::string_view name : block_switches_) {
    const auto sw = tree_.find_switch(name);
    if (!sw) return false;
    switch_of_block.push_back(*sw);
  }
  tree_.remap_node_switches(switch_of_block);
  return tree_.sort_nodes();
}

}  // namespace

std::optional<Cluster> topograph_model_cluster_fast(std::string_view text, const DiscoveryOptions& options) {
  if (options.strict || !plain_yaml::plain_text(text)) return std::nullopt;
  TopographFastReader reader(text);
  if (!reader.read()) return std::nullopt;
  return reader.build(options);
}

}  // namespace toposched
