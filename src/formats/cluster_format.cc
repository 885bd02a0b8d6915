#include "formats/cluster_format.h"

#include <algorithm>
#include <set>
#include <vector>

#include "formats/slurm_topology.h"
#include "topology/text.h"

namespace toposched {

namespace {

// What the first bytes say: the top-level keys, the top-level `kind`, and the `kind` of the
// first item of a top-level `items` list; for a top-level sequence, whether its first item
// has a `topology` key.
struct Head {
  std::set<std::string, std::less<>> keys;
  std::string kind;
  std::string item_kind;
  bool sequence = false;
  bool first_item_has_topology = false;
};

std::string unquote(std::string_view s) {
  s = trim(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
  return std::string(s);
}

// "key: value" (block style, the key plain or quoted) -> key, value; nullopt otherwise.
bool split_key(std::string_view line, std::string& key, std::string& value) {
  std::size_t colon = std::string_view::npos;
  if (!line.empty() && (line.front() == '"' || line.front() == '\'')) {
    auto close = line.find(line.front(), 1);
    if (close == std::string_view::npos || close + 1 >= line.size() || line[close + 1] != ':') return false;
    colon = close + 1;
  } else {
    colon = line.find(": ");
    if (colon == std::string_view::npos && !line.empty() && line.back() == ':') colon = line.size() - 1;
    if (colon == std::string_view::npos) return false;
  }
  key = unquote(line.substr(0, colon));
  value = unquote(line.substr(colon + 1));
  return !key.empty();
}

std::size_t indent_of(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  return i;
}

// Block-style YAML, line by line: top-level keys at column 0; the first item of `items`.
Head scan_yaml(std::string_view text) {
  Head h;
  bool in_items = false, in_first_item = false, first_line = true;
  std::size_t item_col = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line == "---" || line.front() == '%') continue;
    const std::size_t col = indent_of(raw);
    std::string key, value;
    if (first_line) {
      first_line = false;
      if (line.front() == '-') {
        h.sequence = true;
        std::string_view rest = trim(line.substr(1));
        if (split_key(rest, key, value) && key == "topology") h.first_item_has_topology = true;
        item_col = col;
        in_first_item = true;
        continue;
      }
    }
    if (h.sequence) {
      if (col <= item_col && line.front() == '-') break;  // the second item
      if (in_first_item && col == item_col + 2 && split_key(line, key, value) && key == "topology")
        h.first_item_has_topology = true;
      continue;
    }
    if (col == 0 && line.front() != '-') {
      in_items = in_first_item = false;
      if (!split_key(line, key, value)) continue;
      h.keys.insert(key);
      if (key == "kind") h.kind = value;
      if (key == "items") in_items = true;
      continue;
    }
    if (!in_items) continue;
    if (line.front() == '-' && (!in_first_item || col <= item_col)) {
      if (in_first_item) {  // the second item: the first said nothing
        in_items = in_first_item = false;
        continue;
      }
      in_first_item = true;  // the first item; dashes deeper inside it are its own lists
      item_col = col;
      if (split_key(trim(line.substr(1)), key, value) && key == "kind") h.item_kind = value;
    } else if (in_first_item && col == item_col + 2 && split_key(line, key, value) && key == "kind") {
      h.item_kind = value;
    }
  }
  return h;
}

// JSON, token by token: keys at depth 1, and the keys of the first object of "items".
Head scan_json(std::string_view text) {
  Head h;
  std::vector<char> stack;              // '{' or '['
  std::vector<std::string> last_key;    // per depth
  std::vector<bool> expect_key;         // per depth (objects)
  int items_depth = -1;                 // depth of the "items" array
  bool first_item_open = false, first_item_done = false;
  std::string s;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const std::size_t depth = stack.size();
    if (c == '"') {
      s.clear();
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        s += text[i];
      }
      if (depth == 0) return h;  // a bare string: not a cluster
      if (stack.back() == '{' && expect_key.back()) {
        last_key.back() = s;
        if (depth == 1) h.keys.insert(s);
        expect_key.back() = false;
      } else if (stack.back() == '{' && last_key.back() == "kind") {
        if (depth == 1) h.kind = s;
        if (first_item_open && static_cast<int>(depth) == items_depth + 1) h.item_kind = s;
      }
      continue;
    }
    switch (c) {
      case '{':
      case '[':
        if (c == '[' && depth == 1 && last_key.back() == "items") items_depth = 2;
        if (c == '{' && static_cast<int>(depth) == items_depth && !first_item_done) first_item_open = true;
        if (c == '[' && depth == 0) h.sequence = true;
        stack.push_back(c);
        last_key.emplace_back();
        expect_key.push_back(c == '{');
        break;
      case '}':
      case ']':
        if (stack.empty()) return h;
        stack.pop_back();
        last_key.pop_back();
        expect_key.pop_back();
        if (c == '}' && first_item_open && static_cast<int>(stack.size()) == items_depth) {
          first_item_open = false;
          first_item_done = true;
        }
        if (c == ']' && static_cast<int>(stack.size()) + 1 == items_depth) items_depth = -1;
        if (stack.empty()) return h;
        break;
      case ',':
        if (!stack.empty() && stack.back() == '{') expect_key.back() = true;
        break;
      default:
        break;
    }
    if (!h.kind.empty() && !h.item_kind.empty()) return h;
  }
  return h;
}

bool json_text(std::string_view text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{' || c == '[';
  }
  return false;
}

}  // namespace

ClusterFormat detect_cluster_format(std::string_view head) {
  head = head.substr(0, kClusterFormatHeadBytes);
  if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);  // UTF-8 byte order mark
  if (looks_like_slurm_topology(head)) return ClusterFormat::kSlurmTopologyConf;
  const Head h = json_text(head) ? scan_json(head) : scan_yaml(head);
  if (h.sequence) return h.first_item_has_topology ? ClusterFormat::kSlurmTopologyYaml : ClusterFormat::kUnknown;
  if (h.kind == "Node" || h.kind == "NodeList" || h.item_kind == "Node") return ClusterFormat::kK8sNodes;
  if (h.kind == "ResourceSlice" || h.kind == "ResourceSliceList" || h.item_kind == "ResourceSlice")
    return ClusterFormat::kResourceSlices;
  auto has = [&](std::string_view k) { return h.keys.contains(k); };
  if (has("node_types")) return ClusterFormat::kNativeSpec;
  if (has("switches") || has("blocks") || has("capacity_blocks")) return ClusterFormat::kTopographModel;
  for (std::string_view k : {"nodes", "fabric", "name", "version", "accelerator_domains"})
    if (has(k)) return ClusterFormat::kNativeSpec;
  // An empty `kubectl get nodes` list: {"apiVersion": "v1", "items": [], "kind": "List"}.
  if (h.kind == "List" && h.item_kind.empty() && has("items")) return ClusterFormat::kK8sNodes;
  return ClusterFormat::kUnknown;
}

std::string_view cluster_format_name(ClusterFormat f) {
  switch (f) {
    case ClusterFormat::kNativeSpec: return "toposched cluster spec";
    case ClusterFormat::kSlurmTopologyConf: return "Slurm topology.conf";
    case ClusterFormat::kSlurmTopologyYaml: return "Slurm topology.yaml";
    case ClusterFormat::kTopographModel: return "Topograph model";
    case ClusterFormat::kK8sNodes: return "Kubernetes nodes";
    case ClusterFormat::kResourceSlices: return "Kubernetes ResourceSlices";
    case ClusterFormat::kUnknown: break;
  }
  return "unknown";
}

std::string cluster_formats_tried() {
  return "toposched cluster spec (top-level node_types/nodes), Slurm topology.conf (SwitchName=, BlockName= or "
         "BlockSizes=), Slurm topology.yaml (a list of '- topology:'), Topograph model (top-level switches/blocks), "
         "Kubernetes nodes (kind Node or NodeList, or a List of items of kind Node), Kubernetes ResourceSlices (kind "
         "ResourceSlice or ResourceSliceList, or a List of them)";
}

}  // namespace toposched
