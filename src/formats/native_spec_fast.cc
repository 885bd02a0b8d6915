#include "formats/native_spec_fast.h"

#include <utility>

#include "formats/plain_yaml.h"
#include "formats/text_scan.h"

namespace toposched {
namespace {

using plain_yaml::flow_list;
using plain_yaml::flow_map;
using plain_yaml::hostlist_text;
using plain_yaml::kNone;
using plain_yaml::plain_line;
using plain_yaml::plain_name;
using plain_yaml::scalar;
using plain_yaml::split_key;

// One item of a list being read: a flow map on one line (closed at once) or a block map
// whose `KEY: VALUE` lines go on at the item's indent + 2.
struct ItemState {
  std::size_t indent = kNone;  // of the list's `- ` (the first item sets it)
  bool open = false;           // a block map taking more lines
  bool any = false;            // an item was read
};

class Splitter {
 public:
  explicit Splitter(std::string_view text) : text_(text) {}

  bool run() {
    if (!for_each_line(text_, [this](std::string_view line) { return read_line(line); })) return false;
    if (!end_section()) return false;
    if (!fabric_rest_.empty()) out_.head += "fabric:\n" + fabric_rest_;
    return seen_nodes_;
  }

  NativeSpecSections take() { return std::move(out_); }

 private:
  enum class Section { kNone, kHead, kNodes, kFabric };
  enum class Sub { kNone, kSwitches, kRest };

  bool read_line(std::string_view line) {
    std::size_t indent = 0;
    while (indent < line.size() && line[indent] == ' ') ++indent;
    std::string_view c = line.substr(indent);
    while (!c.empty() && c.back() == ' ') c.remove_suffix(1);
    const bool blank = c.empty() || c[0] == '#';  // or a whole-line comment
    if (!blank && indent == 0 && !c.starts_with("- ")) return top_key(line, c);
    // The head keeps every line of its sections as it is (a block scalar's blank lines).
    if (section_ == Section::kHead ||
        (section_ == Section::kFabric && sub_ == Sub::kRest && (blank || indent != 2 || c.starts_with("- ")))) {
      (section_ == Section::kHead ? out_.head : fabric_rest_).append(line).push_back('\n');
      return true;
    }
    if (blank) return true;
    switch (section_) {
      case Section::kHead:
        return false;  // taken above
      case Section::kNodes:
        return plain_line(c) && item_line(nodes_, indent, c, true);
      case Section::kFabric:
        return fabric_line(line, indent, c);
      case Section::kNone:
        break;
    }
    return false;
  }

  bool top_key(std::string_view line, std::string_view c) {
    std::string_view key, value;
    if (!end_section() || !split_key(c, key, value)) return false;
    if (key == "nodes" || key == "fabric") {
      bool& seen = key == "nodes" ? seen_nodes_ : seen_fabric_;
      if (seen || !value.empty()) return false;
      seen = true;
      section_ = key == "nodes" ? Section::kNodes : Section::kFabric;
      return true;
    }
    section_ = Section::kHead;  // yaml-cpp finds a key given twice there
    out_.head.append(line).push_back('\n');
    return true;
  }

  // Under `fabric:`: sub-keys at column 2; `switches` is read here, the others go to the head.
  bool fabric_line(std::string_view line, std::size_t indent, std::string_view c) {
    if (indent == 2 && !c.starts_with("- ")) {
      std::string_view key, value;
      if (!end_list(switches_) || !split_key(c, key, value)) return false;
      if (key == "switches") {
        if (out_.has_switches || !value.empty()) return false;
        out_.has_switches = true;
        sub_ = Sub::kSwitches;
        return true;
      }
      sub_ = Sub::kRest;
    }
    if (sub_ == Sub::kRest) {
      fabric_rest_.append(line).push_back('\n');
      return true;
    }
    return sub_ == Sub::kSwitches && plain_line(c) && item_line(switches_, indent, c, false);
  }

  // A line of the `nodes` list (nodes) or of `fabric.switches`.
  bool item_line(ItemState& list, std::size_t indent, std::string_view c, bool nodes) {
    const std::size_t base = nodes ? 0 : 2;  // the list's key's column
    if (c.starts_with("- ")) {
      if (list.indent == kNone && (indent == base || indent == base + 2)) list.indent = indent;
      if (indent != list.indent || !end_item(list, nodes)) return false;
      const std::string_view rest = c.substr(2);
      if (rest.empty() || rest[0] == ' ') return false;
      list.any = true;
      if (nodes)
        out_.groups.emplace_back();
      else
        out_.switches.emplace_back();
      if (rest[0] == '{') {
        return flow_map(rest, [&](std::string_view k, std::string_view v, bool quoted) {
          return nodes ? group_key(k, v, quoted, false) : switch_key(k, v, quoted, false);
        });
      }
      list.open = true;
      return block_key(rest, nodes);
    }
    return list.open && indent == list.indent + 2 && block_key(c, nodes);
  }

  bool block_key(std::string_view c, bool nodes) {
    std::string_view key, value, text;
    bool quoted = false;
    if (!split_key(c, key, value)) return false;
    if (!nodes && key == "switches" && value.starts_with('['))
      return switch_key(key, value, false, true);  // a flow list
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      text = value.substr(1, value.size() - 2);
      quoted = true;
      if (text.find('"') != kNone) return false;
    } else {
      text = value;  // plain; in a block map it may be a hostlist
      if (!hostlist_text(text, false)) return false;
    }
    return nodes ? group_key(key, text, quoted, true) : switch_key(key, text, quoted, true);
  }

  // `names` (a hostlist) and `type`, each once.
  bool group_key(std::string_view key, std::string_view text, bool quoted, bool block) {
    NativeNodeGroup& g = out_.groups.back();
    if (!value_ok(text, quoted, block, key == "names")) return false;
    std::string_view& slot = key == "names" ? g.names : g.type;
    if ((key != "names" && key != "type") || slot.data() != nullptr) return false;
    slot = text;
    return true;
  }

  // `name`, `tier`, `nodes` (a hostlist), `parent` and `switches` (a flow list or one name), each once.
  bool switch_key(std::string_view key, std::string_view text, bool quoted, bool block) {
    NativeSwitch& s = out_.switches.back();
    if (key == "switches") {
      if (s.has_children) return false;
      s.has_children = true;
      if (text.starts_with('['))
        return flow_list(
            text, [&](std::string_view t, bool q) { return !q && plain_name(t) && (s.children.push_back(t), true); });
      if (quoted || !plain_name(text)) return false;
      s.children.push_back(text);
      return true;
    }
    if (!value_ok(text, quoted, block, key == "nodes")) return false;
    std::string_view* slot = key == "name"     ? &s.name
                             : key == "tier"   ? &s.tier
                             : key == "nodes"  ? &s.nodes
                             : key == "parent" ? &s.parent
                                               : nullptr;
    if (slot == nullptr || slot->data() != nullptr) return false;
    *slot = text;
    if (key == "nodes") s.has_nodes = true;
    if (key == "parent") s.has_parent = true;
    return true;
  }

  // A value as the reader needs it: quoted text of a name or hostlist's characters, a plain
  // name, or (in a block map, for a hostlist key) a plain hostlist.
  static bool value_ok(std::string_view text, bool quoted, bool block, bool hostlist) {
    if (quoted) return hostlist_text(text, true);
    return plain_name(text) || (block && hostlist && hostlist_text(text, false));
  }

  // The item read so far is complete: its required keys are there.
  bool end_item(ItemState& list, bool nodes) {
    list.open = false;
    if (!list.any) return true;
    if (nodes) return out_.groups.back().names.data() != nullptr && out_.groups.back().type.data() != nullptr;
    return out_.switches.back().name.data() != nullptr && out_.switches.back().tier.data() != nullptr;
  }

  // A list ends: it had an item (`nodes:` or `switches:` with none is null, an error there).
  bool end_list(ItemState& list) {
    if (list.indent == kNone && !list.any) return sub_ != Sub::kSwitches;
    return end_item(list, &list == &nodes_);
  }

  bool end_section() {
    bool ok = true;
    if (section_ == Section::kNodes) ok = nodes_.any && end_item(nodes_, true);
    if (section_ == Section::kFabric) ok = end_list(switches_);
    section_ = Section::kNone;
    sub_ = Sub::kNone;
    return ok;
  }

  std::string_view text_;
  NativeSpecSections out_;
  std::string fabric_rest_;  // fabric's other sub-keys, for the head
  Section section_ = Section::kNone;
  Sub sub_ = Sub::kNone;
  bool seen_nodes_ = false, seen_fabric_ = false;
  ItemState nodes_, switches_;
};

}  // namespace

std::optional<NativeSpecSections> split_native_spec(std::string_view text) {
  if (!plain_yaml::plain_text(text)) return std::nullopt;
  Splitter s(text);
  if (!s.run()) return std::nullopt;
  return s.take();
}

}  // namespace toposched
