#include "formats/topograph_export.h"

#include <fmt/format.h>

#include "formats/json_input.h"
#include <yaml-cpp/yaml.h>

#include "topology/yaml_input.h"

#include "formats/slurm_block.h"
#include "formats/slurm_tree.h"
#include "formats/slurm_yaml.h"

namespace toposched {

namespace {

using Json = nlohmann::json;

tl::unexpected<Error> bad(std::string message) { return make_error(ErrorCode::kInvalidArgument, std::move(message)); }

Result<void> expect_keys(const Json& j, std::string_view what, std::initializer_list<std::string_view> allowed) {
  if (!j.is_object()) return bad(fmt::format("{}: expected an object, found {}", what, j.type_name()));
  for (const auto& [key, value] : j.items())
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      return bad(fmt::format("{}: unknown key '{}'", what, key));
  return {};
}

Result<std::string> string_at(const Json& j, const char* key, std::string_view what) {
  if (!j.contains(key)) return std::string();
  if (!j[key].is_string()) return bad(fmt::format("{}: '{}' must be a string, found {}", what, key, j[key].type_name()));
  return j[key].get<std::string>();
}

Result<std::vector<long>> sizes_at(const Json& j, std::string_view what) {
  std::vector<long> sizes;
  if (!j.contains("blockSizes") || j["blockSizes"].is_null()) return sizes;
  const Json& v = j["blockSizes"];
  if (!v.is_array()) return bad(fmt::format("{}: 'blockSizes' must be an array of integers, found {}", what, v.type_name()));
  for (const auto& s : v) {
    if (!s.is_number_integer()) return bad(fmt::format("{}: 'blockSizes' must be an array of integers, found {}", what, quote_json(s)));
    sizes.push_back(s.get<long>());
  }
  return sizes;
}

Result<std::optional<BlockNameRule>> block_name_at(const Json& j, std::string_view what) {
  if (!j.contains("blockName") || j["blockName"].is_null()) return std::optional<BlockNameRule>();
  const Json& b = j["blockName"];
  std::string where = fmt::format("{}.blockName", what);
  TOPOSCHED_CHECK(expect_keys(b, where, {"nodeNameRegexp", "format"}));
  TOPOSCHED_TRY(re, string_at(b, "nodeNameRegexp", where));
  TOPOSCHED_TRY(format, string_at(b, "format", where));
  BlockNameRule rule{re, format};
  TOPOSCHED_CHECK(validate_block_name_rule(rule));
  return std::optional<BlockNameRule>(rule);
}

Result<TopologyPartition> partition_from_json(const std::string& name, const Json& t) {
  std::string what = fmt::format("topology \"{}\"", name);
  TOPOSCHED_CHECK(expect_keys(t, what, {"plugin", "nodes", "blockSizes", "blockName", "clusterDefault", "partition"}));
  TopologyPartition p;
  p.name = name;
  TOPOSCHED_TRY(plugin, string_at(t, "plugin", what));
  p.plugin = plugin;
  TOPOSCHED_TRY(sizes, sizes_at(t, what));
  auto valid = validate_block_sizes(sizes);
  if (!valid) return bad(fmt::format("{}: {}", what, valid.error().message));
  p.block_sizes = sizes;
  TOPOSCHED_TRY(rule, block_name_at(t, what));
  p.block_name = rule;
  if (t.contains("clusterDefault")) {
    if (!t["clusterDefault"].is_boolean()) return bad(fmt::format("{}: 'clusterDefault' must be true or false", what));
    p.cluster_default = t["clusterDefault"].get<bool>();
  }
  if (t.contains("nodes") && !t["nodes"].is_null()) {
    if (!t["nodes"].is_array()) return bad(fmt::format("{}: 'nodes' must be an array of hostlists", what));
    for (const auto& n : t["nodes"]) {
      if (!n.is_string()) return bad(fmt::format("{}: 'nodes' must be an array of hostlists", what));
      p.nodes.push_back(n.get<std::string>());
    }
  } else if (!(p.cluster_default && p.plugin == "topology/flat")) {
    return bad(fmt::format("{}: give its 'nodes' (toposched does not ask Slurm for partition '{}')", what,
                           t.value("partition", std::string())));
  }
  return p;
}

// YAML -> JSON for the parameter readers: plain scalars that read as integers or booleans
// become numbers and booleans, everything else strings.
Json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    Json j = Json::object();
    for (auto it = n.begin(); it != n.end(); ++it) j[it->first.as<std::string>()] = yaml_to_json(it->second);
    return j;
  }
  if (n.IsSequence()) {
    Json j = Json::array();
    for (const auto& e : n) j.push_back(yaml_to_json(e));
    return j;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& text = n.Scalar();
  if (n.Tag() != "!") {
    long v = 0;
    if (YAML::convert<long>::decode(n, v)) return v;
    bool b = false;
    if (YAML::convert<bool>::decode(n, b)) return b;
  }
  return text;
}

Result<std::vector<TopologyPartition>> read_topologies_or_throw(std::string_view text, const std::string& file);

}  // namespace

Result<std::vector<TopologyPartition>> read_topologies(std::string_view text, const std::string& file) {
  try {
    return read_topologies_or_throw(text, file);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}

namespace {
Result<std::vector<TopologyPartition>> read_topologies_or_throw(std::string_view text, const std::string& file) {
  YamlInput in(file);
  TOPOSCHED_TRY(root, in.parse(text));
  if (!root.IsMap()) return in.error_at(root, fmt::format("expected Topograph's 'topologies' mapping, found {}", YamlInput::describe(root)));
  YAML::Node topologies = root["topologies"] ? root["topologies"] : root;
  if (!topologies.IsMap() || topologies.size() == 0)
    return in.error_at(topologies, "expected 'topologies' to map topology names to {plugin, nodes, ...}");
  std::vector<TopologyPartition> out;
  for (auto it = topologies.begin(); it != topologies.end(); ++it) {
    auto p = partition_from_json(it->first.as<std::string>(), yaml_to_json(it->second));
    if (!p) return in.error_at(it->second, p.error().message);
    out.push_back(std::move(*p));
  }
  return out;
}
}  // namespace

Result<TopographParams> topograph_params_from_json(const Json& params) {
  if (params.is_null()) return TopographParams{};
  TOPOSCHED_CHECK(expect_keys(params, "params",
                              {"plugin", "blockSizes", "blockName", "skeletonOnly", "topologies", "topologyConfigPath", "reconfigure"}));
  for (const char* key : {"topologyConfigPath", "reconfigure"})
    if (params.contains(key))
      return bad(fmt::format("params: '{}' is not supported: toposched returns the topology and writes no Slurm file", key));
  TopographParams p;
  TOPOSCHED_TRY(plugin, string_at(params, "plugin", "params"));
  p.plugin = plugin;
  TOPOSCHED_TRY(sizes, sizes_at(params, "params"));
  TOPOSCHED_CHECK(validate_block_sizes(sizes));
  p.block_sizes = sizes;
  TOPOSCHED_TRY(rule, block_name_at(params, "params"));
  p.block_name = rule;
  if (params.contains("skeletonOnly")) {
    if (!params["skeletonOnly"].is_boolean()) return bad("params: 'skeletonOnly' must be true or false");
    p.skeleton_only = params["skeletonOnly"].get<bool>();
  }
  if (params.contains("topologies") && !params["topologies"].is_null()) {
    if (!params["topologies"].is_object()) return bad("params: 'topologies' must be an object of named topologies");
    for (const auto& [name, t] : params["topologies"].items()) {
      TOPOSCHED_TRY(part, partition_from_json(name, t));
      p.topologies.push_back(std::move(part));
    }
  }
  return p;
}

Result<ExportOutput> generate_topograph(const Cluster& cluster, const TopographParams& params) {
  if (!params.topologies.empty() && !params.plugin.empty()) return bad("plugin and topologies parameters are mutually exclusive");
  ExportOptions options;
  options.block_sizes = params.block_sizes;
  options.block_name = params.block_name;
  options.skeleton_only = params.skeleton_only;
  options.topologies = params.topologies;
  if (!params.topologies.empty()) return write_slurm_yaml(cluster, options);
  const std::string plugin = params.plugin.empty() ? "topology/tree" : params.plugin;
  if (params.block_name && plugin != "topology/block") return bad("blockName is only supported with plugin \"topology/block\"");
  if (plugin == "topology/tree") return write_slurm_tree(cluster, options);
  if (plugin == "topology/block") return write_slurm_block(cluster, options);
  return bad(fmt::format("unsupported topology plugin \"{}\"", plugin));
}

}  // namespace toposched
