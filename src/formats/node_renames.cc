#include "formats/node_renames.h"

#include <unordered_map>

#include <fmt/format.h>

#include "formats/text_scan.h"
#include "topology/text.h"
#include "topology/yaml_input.h"

namespace toposched {
namespace {

// Empty, or what a hostlist would read otherwise.
bool usable_node_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (is_ascii_space(c) || c == ',' || c == '[' || c == ']') return false;
  return true;
}

}  // namespace

Result<void> NodeRenames::add(const std::string& from, const std::string& to, const SourceLocation& at) {
  if (!usable_node_name(to))
    return make_error(ErrorCode::kParse,
                      fmt::format("expected a node name for '{}' (no space, ',', '[' or ']'), found '{}'", from, to), at);
  auto [it, fresh] = to_.try_emplace(from, Target{to, at});
  if (!fresh && it->second.name != to)
    return make_error(ErrorCode::kValidation,
                      fmt::format("'{}' is renamed to '{}' here and to '{}' at {}:{}:{}", from, to, it->second.name,
                                  it->second.at.file, it->second.at.line, it->second.at.column),
                      at);
  return {};
}

Result<void> NodeRenames::add_mapping(std::string_view text, const std::string& file) {
  YamlInput in(file);
  try {
    TOPOSCHED_TRY(root, in.parse(text));
    if (!root.IsMap())
      return in.error_at(root, fmt::format("expected a mapping {{name in a source: node name}}, found {}",
                                           YamlInput::describe(root)));
    for (const auto& kv : root) {
      if (!kv.first.IsScalar())
        return in.error_at(kv.first, fmt::format("expected a name in a source, found {}", YamlInput::describe(kv.first)));
      TOPOSCHED_TRY(to, in.string(kv.second, kv.first.Scalar()));
      TOPOSCHED_CHECK(add(kv.first.Scalar(), to, in.where(kv.second)));
    }
    return {};
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg), location_of(e.mark, file));
  }
}

Result<void> NodeRenames::add_instance_ids(std::string_view text, const std::string& file) {
  constexpr std::string_view kExpected = "'NODE: INSTANCE-ID' (pdsh's output of the instance-id query)";
  TOPOSCHED_TRY(lines, pdsh_lines(text, file, kExpected));
  std::unordered_map<std::string, std::string> node_of_id;  // this file's, to catch an id on two nodes
  for (const PdshLine& line : lines) {
    const std::string node(line.host), id(line.output);
    if (id.empty() || !usable_node_name(id))
      return make_error(ErrorCode::kParse, fmt::format("expected {}, found '{}: {}'", kExpected, node, id),
                        SourceLocation{file, line.number, 1});
    const SourceLocation at{file, line.number, line.output_column};
    if (auto [it, fresh] = node_of_id.try_emplace(id, node); !fresh && it->second != node)
      return make_error(ErrorCode::kValidation,
                        fmt::format("instance '{}' is on node '{}' and on node '{}'", id, it->second, node), at);
    TOPOSCHED_CHECK(add(id, node, at));
  }
  return {};
}

Result<void> NodeRenames::apply(std::vector<DiscoveredTopology>& sources, std::vector<std::string>& warnings) const {
  std::map<std::string, bool> used;
  for (DiscoveredTopology& source : sources) {
    std::unordered_map<std::string, std::string> named_from;  // final name -> the name the source gave
    for (DiscoveredNode& node : source.nodes) {
      auto it = to_.find(node.name);
      const std::string& final_name = it == to_.end() ? node.name : it->second.name;
      if (auto [prev, fresh] = named_from.try_emplace(final_name, node.name); !fresh)
        return make_error(ErrorCode::kValidation,
                          fmt::format("{}: nodes '{}' and '{}' would both be named '{}'",
                                      source.source.empty() ? "a source" : source.source, prev->second, node.name,
                                      final_name),
                          it == to_.end() ? SourceLocation{} : it->second.at);
      if (it == to_.end()) continue;
      used[node.name] = true;
      node.name = it->second.name;
    }
  }
  std::vector<std::string> unused;
  for (const auto& [from, target] : to_)
    if (!used.contains(from)) unused.push_back(from);
  warn_about_names(warnings, unused, "name(s) to rename are no node of any source");
  return {};
}

}  // namespace toposched
