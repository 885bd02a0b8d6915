#include "formats/oci_topology.h"

#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "formats/network_paths.h"
#include "formats/text_scan.h"
#include "topology/hardware.h"
#include "topology/text.h"
#include "topology/yaml_input.h"

namespace toposched {
namespace {

// One host's place: its blocks and island, and its GPU memory fabric (empty: none).
struct OciPlace {
  std::string island, network_block, local_block, fabric;

  std::vector<std::string> chain() const {  // farthest first, parts not given left out
    std::vector<std::string> out;
    for (const std::string* id : {&island, &network_block, &local_block})
      if (!id->empty()) out.push_back(*id);
    return out;
  }
};

// The field under either spelling: the CLI writes kebab-case ("local-block-id"), the API
// and the instance metadata camelCase ("localBlockId"). Absent and null (the CLI writes
// null for a value not set) read as empty.
Result<std::string> field(const YamlInput& in, const YAML::Node& map, std::string_view kebab,
                          std::string_view camel) {
  for (std::string_view key : {kebab, camel}) {
    const YAML::Node value = map[std::string(key)];
    if (!value || value.IsNull()) continue;
    return in.string(value, key);
  }
  return std::string();
}

// What one source calls the four ids: {kebab-case, camelCase} names, and whether the first
// three must be there.
struct PlaceKeys {
  std::string_view island[2], network[2], local[2], fabric[2];
  bool required;
};

constexpr PlaceKeys kRdmaKeys{{"customerHPCIslandId", "customerHPCIslandId"},
                              {"customerNetworkBlock", "customerNetworkBlock"},
                              {"customerLocalBlock", "customerLocalBlock"},
                              {"customerGpuMemoryFabric", "customerGpuMemoryFabric"},
                              true};
constexpr PlaceKeys kHostKeys{{"hpc-island-id", "hpcIslandId"},
                              {"network-block-id", "networkBlockId"},
                              {"local-block-id", "localBlockId"},
                              {"gpu-memory-fabric-id", "gpuMemoryFabricId"},
                              false};

Result<OciPlace> read_place(const YamlInput& in, const YAML::Node& map, const PlaceKeys& keys) {
  OciPlace p;
  for (auto [names, id] : {std::pair{keys.island, &p.island}, std::pair{keys.network, &p.network_block},
                           std::pair{keys.local, &p.local_block}}) {
    TOPOSCHED_TRY(value, field(in, map, names[0], names[1]));
    if (keys.required && value.empty())
      return in.error_at(map, fmt::format("expected '{}' in the rdmaTopologyData object", names[0]));
    *id = std::move(value);
  }
  TOPOSCHED_TRY(fabric, field(in, map, keys.fabric[0], keys.fabric[1]));
  p.fabric = std::move(fabric);
  return p;
}

// One host's rdmaTopologyData object.
Result<OciPlace> read_rdma_object(const YamlInput& in, const YAML::Node& data) {
  if (!data.IsMap())
    return in.error_at(data, fmt::format("expected rdmaTopologyData (a mapping with 'customerLocalBlock'), found {}",
                                         YamlInput::describe(data)));
  return read_place(in, data, kRdmaKeys);
}

// Moves an error found in one "NODE: JSON" line's JSON (parsed alone, so at line 1) to where
// that JSON sits in the file.
Error at_line(Error e, int line, int column_offset) {
  if (e.where.line == 1 && e.where.column > 0) e.where.column += column_offset;
  e.where.line = line;
  return e;
}

// OCI's older GPU shapes number a generation instead of naming the GPU (BM.GPU4.8).
constexpr std::pair<std::string_view, std::string_view> kNumberedShapes[] = {
    {"4", "A100 40GB"}, {"3", "V100"}, {"2", "P100"}};

// The GPUs an OCI shape names: BM.GPU.H100.8 -> 8x H100, BM.GPU.A100-v2.8 -> 8x A100 (80GB),
// BM.GPU4.8 -> 8x A100 40GB, BM.GPU3.8 -> 8x V100. {"", 0} for shapes without GPUs.
std::pair<std::string, int> gpus_of_shape(std::string_view shape) {
  const std::size_t gpu = shape.find(".GPU");
  const std::size_t last = shape.rfind('.');
  if (gpu == std::string_view::npos || last == std::string_view::npos || last <= gpu) return {"", 0};
  int count = 0;
  for (char c : shape.substr(last + 1)) {
    if (c < '0' || c > '9') return {"", 0};
    if (count < 1000) count = count * 10 + (c - '0');  // above 64 is an error to the caller
  }
  std::string_view middle = shape.substr(gpu + 4, last - gpu - 4);  // ".H100" or "4"
  for (const auto& [generation, product] : kNumberedShapes)
    if (middle == generation) return {std::string(product), count};
  if (!middle.starts_with(".")) return {"", count};
  middle.remove_prefix(1);
  return {ascii_upper(middle.substr(0, middle.find('-'))), count};
}

}  // namespace

Result<void> OciRdmaTopology::add(std::string_view text, const std::string& file, const std::string& node) {
  try {
    auto record = [&](std::string name, const OciPlace& p) -> Result<void> {
      if (!seen_.insert(name).second)
        return make_error(ErrorCode::kValidation, fmt::format("host '{}' appears twice", name),
                          SourceLocation{file, 0, 0});
      hosts_.push_back({std::move(name), p.chain(), p.fabric});
      return {};
    };
    YamlInput in(file);
    if (trim(text).starts_with('{')) {  // one host's curl output, named after its file
      TOPOSCHED_TRY(root, in.parse(text));
      TOPOSCHED_TRY(place, read_rdma_object(in, root));
      return record(node, place);
    }
    // pdsh -w HOSTS 'curl ...': "NODE: JSON" per line
    TOPOSCHED_TRY(lines, pdsh_lines(text, file, "'NODE: {rdmaTopologyData JSON}' (pdsh's output)"));
    if (lines.empty())
      return make_error(ErrorCode::kParse, "expected rdmaTopologyData JSON or pdsh's 'NODE: JSON' lines, found none",
                        SourceLocation{file, 1, 1});
    for (const PdshLine& line : lines) {
      if (!line.output.starts_with('{')) {  // curl failed on that host (no route, 404 page, timeout)
        unanswered_.push_back(fmt::format("{}:{}: {}", file, line.number, line.host));
        continue;
      }
      const int offset = line.output_column - 1;
      auto root = in.parse(line.output);
      if (!root) return tl::unexpected(at_line(root.error(), line.number, offset));
      auto place = read_rdma_object(in, *root);
      if (!place) return tl::unexpected(at_line(place.error(), line.number, offset));
      auto added = record(std::string(line.host), *place);
      if (!added) return tl::unexpected(at_line(added.error(), line.number, 1));
    }
    return {};
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg), location_of(e.mark, file));
  }
}

DiscoveredTopology OciRdmaTopology::finish(std::string source) const {
  DiscoveredTopology out;
  out.source = std::move(source);
  NetworkPaths paths("host");
  for (const Host& h : hosts_) {
    DiscoveredNode n;
    n.name = h.name;
    n.domain = h.fabric;
    paths.add(out.nodes.size(), h.chain);
    out.nodes.push_back(std::move(n));
  }
  paths.finish(out);
  if (!unanswered_.empty())
    out.warnings.push_back(fmt::format("{} host(s) gave no rdmaTopologyData JSON (pdsh lines whose output is not an "
                                       "object), left out: {}",
                                       unanswered_.size(), fmt::join(unanswered_, ", ")));
  return out;
}

Result<DiscoveredTopology> read_oci_rdma_topology(std::string_view text, const std::string& file,
                                                  const std::string& node) {
  OciRdmaTopology hosts;
  TOPOSCHED_CHECK(hosts.add(text, file, node));
  return hosts.finish(file);
}

Result<DiscoveredTopology> read_oci_compute_hosts(std::string_view text, const std::string& file) {
  YamlInput in(file);
  try {
    TOPOSCHED_TRY(root, in.parse(text));
    YAML::Node items = root;  // [...], {"items"}, {"data": [...]} or {"data": {"items"}}
    if (items.IsMap() && items["data"]) items = items["data"];
    if (items.IsMap() && items["items"]) items = items["items"];
    if (!items.IsSequence())
      return in.error_at(items, fmt::format("expected `oci compute compute-host list` output ({{\"data\": {{\"items\": "
                                            "[...]}}}}) or ListComputeHosts' {{\"items\": [...]}}, found {}",
                                            YamlInput::describe(items)));
    DiscoveredTopology out;
    out.source = file;
    NetworkPaths paths("host");
    std::unordered_set<std::string> seen;
    std::vector<std::string> idle, without_gpus, unknown_gpus;
    for (const auto& host : items) {
      if (!host.IsMap())
        return in.error_at(host, fmt::format("expected a compute host (a mapping), found {}", YamlInput::describe(host)));
      TOPOSCHED_TRY(instance, field(in, host, "instance-id", "instanceId"));
      if (instance.empty()) {  // a host with no instance on it: nothing to schedule there
        TOPOSCHED_TRY(id, field(in, host, "id", "id"));
        idle.push_back(id.empty() ? "(no id)" : id);
        continue;
      }
      if (!seen.insert(instance).second)
        return in.error_at(host, fmt::format("instance '{}' appears on two hosts", instance));
      TOPOSCHED_TRY(p, read_place(in, host, kHostKeys));
      DiscoveredNode n;
      n.name = instance;
      n.domain = p.fabric;
      TOPOSCHED_TRY(shape, field(in, host, "shape", "shape"));
      auto [product, count] = gpus_of_shape(shape);
      if (count > 64) return in.error_at(host, fmt::format("expected at most 64 GPUs per host, found {}", count));
      if (!shape.empty() && count == 0) {  // BM.Standard..., BM.Optimized...: not a GPU host
        without_gpus.push_back(instance);
        continue;
      }
      n.gpu_count = count;
      if (count > 0 && find_gpu_product(product)) {
        n.gpu_model = product;
        n.gpu_model_at = in.where(host);
      } else if (count > 0) {
        unknown_gpus.push_back(instance);
      }
      paths.add(out.nodes.size(), p.chain());
      out.nodes.push_back(std::move(n));
    }
    paths.finish(out);
    warn_about_names(out.warnings, idle, "host(s) running no instance left out");
    warn_about_names(out.warnings, without_gpus, "instance(s) on a shape without GPUs left out");
    warn_about_names(out.warnings, unknown_gpus,
                     "instance(s) whose shape names no GPU product toposched knows take --gpu-model");
    return out;
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("unexpected structure: {}", e.msg), location_of(e.mark, file));
  }
}

}  // namespace toposched
