// The large lists of a native cluster spec, read by hand: the fast path of
// read_native_spec_fast (formats/native_spec.h) for large specs (docs/performance.md,
// "Large inputs").
//
// yaml-cpp builds a tree of about 2.5 kilobytes per node of a spec (4.5 GB for a 50 MB spec of
// 1.6 million nodes), and even its event parse alone takes longer than the 5 s target. A
// spec's size is in two lists: `nodes` (a node group per line) and `fabric.switches`. This
// splits the text into those two lists, read line by line into views of the text, and the
// rest (`version`, `name`, `node_types`, `fabric.tiers`, `fabric.cross_root`,
// `accelerator_domains`: small), which the spec reader parses with yaml-cpp as before.
//
// The lists are taken only in the plain shape a generated spec has, which yaml-cpp reads
// exactly as this does:
//
//   nodes:                                   # items at column 0 or 2
//   - {names: "n[01-32]", type: t}           # a one-line flow map, or a block map:
//   - names: n33                             #   `- KEY: VALUE` and `  KEY: VALUE` lines
//     type: t
//   fabric:                                  # sub-keys at column 2
//     switches:                              # items at column 2 or 4, likewise, with
//     - {name: leaf1, tier: leaf, nodes: "n[01-32]", parent: spine1}   # switches: [a, b]
//
// (values plain names of [A-Za-z0-9._-], or double-quoted with no escape; a plain hostlist
// only in a block map). Anything else in them -- other keys, comments after content, tabs,
// anchors, a key twice, a missing key -- returns nullopt and the caller reads the whole file
// with yaml-cpp, which gives the same result or names the error at file:line:col.
//
// Pure function; the result views `text`. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace toposched {

struct NativeNodeGroup {
  std::string_view names;  // a hostlist
  std::string_view type;
};

struct NativeSwitch {
  std::string_view name, tier;
  std::string_view nodes;   // a hostlist, when has_nodes
  std::string_view parent;  // when has_parent
  bool has_nodes = false, has_parent = false, has_children = false;
  std::vector<std::string_view> children;  // `switches`, when has_children
};

struct NativeSpecSections {
  std::string head;                     // every other top-level key and fabric sub-key, for yaml-cpp
  std::vector<NativeNodeGroup> groups;  // the `nodes` list, in order (at least one)
  bool has_switches = false;            // `fabric.switches` given (then at least one)
  std::vector<NativeSwitch> switches;
};

std::optional<NativeSpecSections> split_native_spec(std::string_view text);

}  // namespace toposched
