#include "formats/cluster_source.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "formats/cluster_format.h"
#include "formats/discovery.h"
#include "formats/k8s_nodes.h"
#include "formats/resource_slices.h"
#include "formats/native_spec.h"
#include "formats/slurm_topology.h"
#include "formats/slurm_topology_fast.h"
#include "formats/topograph_fast.h"
#include "formats/topograph_model.h"
#include "topology/file_io.h"
#include "topology/presets.h"
#include "topology/yaml_document.h"

namespace toposched {

namespace {
// The options a cluster file is merged with: the defaults, the cluster named after the file.
DiscoveryOptions options_for(const std::string& file) {
  DiscoveryOptions o;
  o.cluster_name = std::filesystem::path(file).stem().string();
  if (o.cluster_name.empty()) o.cluster_name = "cluster";
  return o;
}

// A Slurm topology.conf or a Topograph model names nodes and switches only (docs/formats.md).
Result<Cluster> from_discovered(Result<DiscoveredTopology> t, const std::string& file) {
  return cluster_from_discovered(std::move(t), options_for(file), file);
}

// The first kClusterFormatHeadBytes of a regular file; nullopt for anything else (pipes and
// devices are read once, whole) or when it cannot be read (read_text_file then says why).
std::optional<std::string> read_head(const std::string& path) {
  std::error_code ec;
  if (path == "-" || !std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string head(kClusterFormatHeadBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head;
}

tl::unexpected<Error> unknown_format(std::string_view text, const std::string& file) {
  std::string_view first = text.substr(0, std::min<std::size_t>(text.find('\n'), 60));
  while (!first.empty() && (first.back() == '\r' || first.back() == ' ')) first.remove_suffix(1);
  std::string shown;
  for (char c : first) shown += (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) ? '?' : c;
  return make_error(ErrorCode::kParse,
                    fmt::format("not a cluster format toposched reads (it starts '{}'); tried: {}", shown,
                                cluster_formats_tried()),
                    SourceLocation{file, 1, 1});
}
}  // namespace

Result<Cluster> cluster_from_discovered(Result<DiscoveredTopology> read, const DiscoveryOptions& options,
                                        const std::string& file) {
  if (!read) return tl::unexpected(read.error());
  std::vector<DiscoveredTopology> sources;  // not {std::move(*read)}: an initializer list is copied
  sources.push_back(std::move(*read));
  auto merged = merge_discovered(std::move(sources), options);
  if (!merged) {
    Error e = merged.error();
    if (e.where.file.empty()) e.where.file = file;
    return tl::unexpected(e);
  }
  return std::move(merged->cluster);
}

Result<Cluster> load_cluster_text(std::string_view text, const std::string& file) {
  switch (detect_cluster_format(text)) {
    case ClusterFormat::kSlurmTopologyConf:
      // A plain tree file is built straight from its text (the same model); anything else,
      // errors included, by the general reader.
      if (auto c = slurm_topology_cluster_fast(text, options_for(file))) return std::move(*c);
      return from_discovered(read_slurm_topology(text, file), file);
    case ClusterFormat::kSlurmTopologyYaml: return from_discovered(read_slurm_topology_yaml(text, file), file);
    case ClusterFormat::kK8sNodes: return from_discovered(read_k8s_nodes(text, file), file);
    case ClusterFormat::kResourceSlices: return from_discovered(read_resource_slices(text, file), file);
    case ClusterFormat::kTopographModel: {
      // A plain model (switches and blocks by name) is built straight from its text.
      if (auto c = topograph_model_cluster_fast(text, options_for(file))) return std::move(*c);
      TOPOSCHED_TRY(root, load_yaml_document(text, file));
      return from_discovered(read_topograph_model(root, file), file);
    }
    case ClusterFormat::kNativeSpec: {
      // A plain spec's node and switch lists are read without a yaml-cpp tree.
      if (auto c = read_native_spec_fast(text, file)) return std::move(*c);
      TOPOSCHED_TRY(root, load_yaml_document(text, file));
      return read_native_spec(root, file);
    }
    case ClusterFormat::kUnknown: break;
  }
  return unknown_format(text, file);
}

Result<Cluster> load_cluster(const std::string& spec) {
  constexpr std::string_view kPreset = "preset:";
  if (spec.starts_with(kPreset)) return build_preset(std::string_view(spec).substr(kPreset.size()));
  // The format is decided on the first bytes: a file of none of the formats is refused
  // before the rest of it is read (or parsed).
  if (auto head = read_head(spec); head && detect_cluster_format(*head) == ClusterFormat::kUnknown)
    return unknown_format(*head, spec);
  auto text = read_text_file(spec);
  if (!text) {
    Error e = text.error();
    if (spec.find(':') == std::string::npos && spec.find('/') == std::string::npos && spec.find('.') == std::string::npos)
      e.message += fmt::format(" (to use a built-in cluster, write 'preset:{}'; see 'toposched presets')", spec);
    return tl::unexpected(e);
  }
  return load_cluster_text(*text, spec);
}

}  // namespace toposched
