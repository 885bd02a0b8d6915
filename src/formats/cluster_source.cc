#include "formats/cluster_source.h"

#include <fmt/format.h>

#include "formats/native_spec.h"
#include "topology/file_io.h"
#include "topology/presets.h"

namespace toposched {

Result<Cluster> load_cluster_text(std::string_view text, const std::string& file) {
  if (looks_like_native_spec(text)) return read_native_spec(text, file);
  // Not recognisably anything: let the native reader explain what it expected.
  return read_native_spec(text, file);
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
