#include "formats/cluster_source.h"

#include <filesystem>

#include <fmt/format.h>

#include "formats/discovery.h"
#include "formats/native_spec.h"
#include "formats/slurm_topology.h"
#include "formats/topograph_model.h"
#include "topology/file_io.h"
#include "topology/presets.h"
#include "topology/yaml_document.h"

namespace toposched {

namespace {
// A Slurm topology.conf or a Topograph model names nodes and switches only: nodes get the
// generic node type of discovery (docs/formats.md); merge warnings are not reported here.
Result<Cluster> from_discovered(Result<DiscoveredTopology> t, const std::string& file) {
  if (!t) return tl::unexpected(t.error());
  DiscoveryOptions o;
  o.cluster_name = std::filesystem::path(file).stem().string();
  if (o.cluster_name.empty()) o.cluster_name = "cluster";
  auto r = merge_discovered({std::move(*t)}, o);
  if (!r) {
    Error e = r.error();
    if (e.where.file.empty()) e.where.file = file;
    return tl::unexpected(e);
  }
  return std::move(r->cluster);
}
}  // namespace

Result<Cluster> load_cluster_text(std::string_view text, const std::string& file) {
  if (looks_like_slurm_topology(text)) return from_discovered(read_slurm_topology(text, file), file);
  // Everything else is YAML or JSON: parse it once (large models are costly to parse).
  TOPOSCHED_TRY(root, load_yaml_document(text, file));
  if (looks_like_topograph_model(root)) return from_discovered(read_topograph_model(root, file), file);
  // A native spec, or not recognisably anything: the native reader explains what it expected.
  return read_native_spec(root, file);
}

Result<Cluster> load_cluster(const std::string& spec) {
  constexpr std::string_view kPreset = "preset:";
  if (spec.starts_with(kPreset)) return build_preset(std::string_view(spec).substr(kPreset.size()));
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
