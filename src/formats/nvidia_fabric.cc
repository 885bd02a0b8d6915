#include "formats/nvidia_fabric.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "formats/text_scan.h"

namespace toposched {
namespace {

// What one GPU says. `domain` empty = none (with `why`).
struct GpuFabric {
  std::string domain;
  std::string why;
  int line = 0;
};

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

bool all_zero(std::string_view uuid) {
  return std::all_of(uuid.begin(), uuid.end(), [](char c) { return c == '0' || c == '-'; });
}

bool is_clique(std::string_view s) {
  return !s.empty() && s.size() <= 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// Validates one (uuid, clique) pair; `where` points at the UUID.
Result<GpuFabric> classify(std::string_view uuid, std::string_view clique, const std::string& file, int line,
                           int uuid_col, int clique_col, int clique_line = 0) {
  if (clique_line == 0) clique_line = line;
  GpuFabric g;
  g.line = line;
  if (uuid == "N/A" || clique == "N/A") {
    g.why = "fabric information is N/A (no multi-node NVLink)";
    return g;
  }
  if (!is_uuid(uuid))
    return make_error(
        ErrorCode::kParse,
        fmt::format("expected a cluster UUID (8-4-4-4-12 hex digits) or N/A, found '{}'", printable(uuid)),
        at(file, line, uuid_col));
  if (!is_clique(clique))
    return make_error(ErrorCode::kParse,
                      fmt::format("expected a clique id (a number) or N/A, found '{}'", printable(clique)),
                      at(file, clique_line, clique_col));
  if (all_zero(uuid)) {
    g.why = "the cluster UUID is all zeros (fabric not registered)";
    return g;
  }
  g.domain = fmt::format("{}.{}", uuid, clique);
  return g;
}

bool looks_like_query(std::string_view text) {
  for (const auto& l : split_lines(text.substr(0, 1 << 16)))
    if (trim(l.text) == "Fabric") return true;
  return false;
}

Result<std::vector<GpuFabric>> read_csv(std::string_view text, const std::string& file) {
  std::vector<GpuFabric> gpus;
  for (const auto& l : split_lines(text)) {
    std::string_view line = l.text;
    if (trim(line).empty()) continue;
    auto comma = line.find(',');
    if (comma == std::string_view::npos)
      return make_error(ErrorCode::kParse,
                        fmt::format("expected 'CLUSTER_UUID, CLIQUE_ID' (the output of nvidia-smi "
                                    "--query-gpu=fabric.clusterUuid,fabric.cliqueId --format=csv,noheader), found '{}'",
                                    printable(line)),
                        at(file, l.number, 1));
    std::string_view a = line.substr(0, comma), b = line.substr(comma + 1);
    if (b.find(',') != std::string_view::npos)
      return make_error(ErrorCode::kParse, "expected two comma-separated fields per line, found more",
                        at(file, l.number, static_cast<int>(comma + 1 + b.find(',') + 1) + 1));
    const int ca =
        static_cast<int>(a.find_first_not_of(" \t") == std::string_view::npos ? 1 : a.find_first_not_of(" \t") + 1);
    const int cb = static_cast<int>(
        comma + 2 + (b.find_first_not_of(" \t") == std::string_view::npos ? 0 : b.find_first_not_of(" \t")));
    if (trim(a) == "fabric.clusterUuid" || trim(a) == "fabric.clusterUuid [unknown]") continue;  // header line
    auto g = classify(trim(a), trim(b), file, l.number, ca, cb);
    if (!g) return tl::unexpected(g.error());
    gpus.push_back(*g);
  }
  return gpus;
}

std::size_t indent_of(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

Result<std::vector<GpuFabric>> read_query(std::string_view text, const std::string& file) {
  std::vector<GpuFabric> gpus;
  const auto lines = split_lines(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i].text) != "Fabric") continue;
    const std::size_t base = indent_of(lines[i].text);
    std::optional<std::string_view> state, status, clique, uuid;
    int clique_col = 0, uuid_col = 0, clique_line = 0, uuid_line = 0, line = lines[i].number;
    std::size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      std::string_view l = lines[j].text;
      if (trim(l).empty()) continue;
      if (indent_of(l) <= base) break;
      auto colon = l.find(':');
      if (colon == std::string_view::npos) continue;  // sub-section heading such as "Health"
      std::string_view key = trim(l.substr(0, colon));
      std::string_view value = trim(l.substr(colon + 1));
      const std::string_view rest = l.substr(colon + 1);
      const int col =
          static_cast<int>(colon + 1 +
                           (rest.size() - rest.substr(rest.find_first_not_of(" \t") == std::string_view::npos
                                                          ? rest.size()
                                                          : rest.find_first_not_of(" \t"))
                                              .size())) +
          1;
      if (key == "State") state = value;
      if (key == "Status") status = value;
      if (key == "CliqueId") {
        clique = value;
        clique_col = col;
        clique_line = lines[j].number;
      }
      if (key == "ClusterUUID") {
        uuid = value;
        uuid_col = col;
        uuid_line = lines[j].number;
      }
    }
    i = j - 1;
    GpuFabric g;
    g.line = line;
    if (status && *status != "Success") {
      g.why = fmt::format("fabric status is '{}'", printable(*status));
    } else if (state && *state != "Completed") {
      g.why = fmt::format("fabric state is '{}'", printable(*state));
    } else if (!clique || !uuid) {
      return make_error(ErrorCode::kParse,
                        fmt::format("expected 'CliqueId' and 'ClusterUUID' in the Fabric section, found {}",
                                    !clique && !uuid ? "neither"
                                    : !clique        ? "no CliqueId"
                                                     : "no ClusterUUID"),
                        at(file, line, static_cast<int>(base) + 1));
    } else {
      auto c = classify(*uuid, *clique, file, uuid_line, uuid_col, clique_col, clique_line);
      if (!c) return tl::unexpected(c.error());
      g = *c;
      g.line = line;
    }
    gpus.push_back(g);
  }
  if (gpus.empty())
    return make_error(ErrorCode::kParse, "expected a 'Fabric' section (from nvidia-smi -q), found none",
                      at(file, 1, 1));
  return gpus;
}

}  // namespace

bool looks_like_nvidia_fabric(std::string_view text) {
  if (looks_like_query(text)) return true;
  auto lines = split_lines(text.substr(0, 4096));
  for (const auto& l : lines) {
    if (trim(l.text).empty()) continue;
    auto comma = l.text.find(',');
    if (comma == std::string_view::npos) return false;
    std::string_view a = trim(l.text.substr(0, comma));
    return a == "N/A" || is_uuid(a);
  }
  return false;
}

Result<NodeFabric> read_nvidia_fabric(std::string_view text, const std::string& file) {
  auto gpus = looks_like_query(text) ? read_query(text, file) : read_csv(text, file);
  if (!gpus) return tl::unexpected(gpus.error());
  NodeFabric out;
  out.gpus = static_cast<int>(gpus->size());
  if (gpus->empty())
    return make_error(ErrorCode::kParse, "expected one line per GPU, found an empty file", at(file, 1, 1));
  const GpuFabric& first = gpus->front();
  for (const auto& g : *gpus)
    if (g.domain != first.domain)
      return make_error(ErrorCode::kValidation,
                        fmt::format("ambiguous NVLink domain: the GPU on line {} reports '{}' but the GPU on line {} "
                                    "reports '{}'; all GPUs of a node must be in one domain",
                                    first.line, first.domain.empty() ? "none" : first.domain, g.line,
                                    g.domain.empty() ? "none" : g.domain),
                        at(file, g.line, 1));
  out.domain = first.domain;
  if (out.domain.empty()) out.warnings.push_back(fmt::format("not in any NVLink domain: {}", first.why));
  return out;
}

}  // namespace toposched
