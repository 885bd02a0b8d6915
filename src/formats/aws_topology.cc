#include "formats/aws_topology.h"

#include <unordered_map>

#include <fmt/format.h>

#include "formats/network_paths.h"
#include "topology/yaml_input.h"

namespace toposched {
namespace {

struct TypeHint {
  std::string_view prefix;  // instance family, before the '.'
  std::string_view gpu;
  int count;
  bool nvlink_domain;  // CapacityBlockId is a multi-node NVLink domain
};

constexpr TypeHint kTypes[] = {
    {"p6e-gb200", "GB200", 4, true}, {"p6-b200", "B200", 8, false}, {"p5en", "H200", 8, false},
    {"p5e", "H200", 8, false},       {"p5", "H100", 8, false},      {"p4de", "A100", 8, false},
    {"p4d", "A100", 8, false},
};

const TypeHint* hint_for(std::string_view type) {
  std::string_view family = type.substr(0, type.find('.'));
  for (const auto& h : kTypes)
    if (family == h.prefix) return &h;
  return nullptr;
}

}  // namespace

bool looks_like_aws_topology(std::string_view text) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    return root.IsMap() && root["Instances"] && root["Instances"].IsSequence();
  } catch (const std::exception&) {
    return false;
  }
}

Result<DiscoveredTopology> read_aws_topology(std::string_view text, const std::string& file) {
  YamlInput in(file);
  try {
    auto root = in.parse(text);
    if (!root) return tl::unexpected(root.error());
    if (!root->IsMap() || !(*root)["Instances"])
      return in.error_at(*root, "expected DescribeInstanceTopology output: a mapping with 'Instances'");
    const YAML::Node instances = (*root)["Instances"];
    auto ok = in.expect_sequence(instances, "'Instances'");
    if (!ok) return tl::unexpected(ok.error());
    DiscoveredTopology out;
    out.source = file;
    NetworkPaths paths("instance");
    std::unordered_map<std::string, bool> seen;
    for (const auto& inst : instances) {
      if (!inst.IsMap())
        return in.error_at(inst, fmt::format("expected an instance (a mapping), found {}", YamlInput::describe(inst)));
      auto id = in.req_string(inst, "InstanceId");
      if (!id) return tl::unexpected(id.error());
      if (id->empty()) return in.error_at(inst["InstanceId"], "expected an instance id, found an empty one");
      if (seen[*id]) return in.error_at(inst["InstanceId"], fmt::format("instance '{}' appears twice", *id));
      seen[*id] = true;
      DiscoveredNode node;
      node.name = *id;
      auto type = in.opt_string(inst, "InstanceType");
      if (!type) return tl::unexpected(type.error());
      const TypeHint* hint = *type ? hint_for(**type) : nullptr;
      if (hint) {
        node.gpu_model = std::string(hint->gpu);
        node.gpu_count = hint->count;
      }
      auto cb = in.opt_string(inst, "CapacityBlockId");
      if (!cb) return tl::unexpected(cb.error());
      if (*cb && hint && hint->nvlink_domain) node.domain = **cb;
      if (const YAML::Node nn = inst["NetworkNodes"]) {
        auto words = in.words(nn, "NetworkNodes");
        if (!words) return tl::unexpected(words.error());
        if (words->size() > 16)
          return in.error_at(nn, fmt::format("expected at most 16 network nodes, found {}", words->size()));
        paths.add(out.nodes.size(), std::move(*words));
      }
      out.nodes.push_back(std::move(node));
    }
    paths.finish(out);
    return out;
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg),
                      location_of(e.mark, file));
  }
}

}  // namespace toposched
