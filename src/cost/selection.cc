#include "cost/selection.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>

#include "topology/hostlist.h"
#include "topology/text.h"

namespace toposched {

namespace {

Result<std::pair<int, int>> parse_index_range(std::string_view text, std::string_view item) {
  auto number = [](std::string_view t, int& v) {
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && ec == std::errc() && ptr == t.data() + t.size() && v >= 0;
  };
  int lo = 0, hi = 0;
  auto dash = text.find('-');
  bool ok = dash == std::string_view::npos ? number(text, lo) && (hi = lo, true)
                                           : number(text.substr(0, dash), lo) && number(text.substr(dash + 1), hi);
  if (!ok || hi < lo)
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("in GPU selection item '{}': expected a GPU index or FIRST-LAST range after ':', found '{}'", item,
                    text));
  return std::make_pair(lo, hi);
}

}  // namespace

Result<double> parse_size(std::string_view text) {
  auto bad = [&] {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("expected a size in bytes such as 8, 512K, 1.5M, 8G (K/M/G/T are powers of 1024), found '{}'",
                    text));
  };
  std::string_view t = trim(text);
  std::size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  std::string_view number = t.substr(0, i);
  const std::string suffix = ascii_upper(t.substr(i));
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".") return bad();
  double value = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || ptr != number.data() + number.size()) return bad();
  double scale = 1;
  if (!suffix.empty()) {
    static constexpr std::string_view kUnits = "KMGT";
    std::size_t u = kUnits.find(suffix[0]);
    std::string_view rest = std::string_view(suffix).substr(u == std::string_view::npos ? 0 : 1);
    if (u != std::string_view::npos) scale = std::pow(1024.0, static_cast<double>(u + 1));
    if (!(rest.empty() || rest == "B" || (u != std::string_view::npos && rest == "IB"))) return bad();
  }
  double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes > 1e18) return bad();
  return std::floor(bytes);
}

std::string format_size(double bytes) {
  static constexpr std::string_view kUnits[] = {"", "K", "M", "G", "T"};
  int u = 0;
  double v = bytes;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (v == std::floor(v)) return fmt::format("{}{}", static_cast<long long>(v), kUnits[u]);
  return fmt::format("{:.1f}{}", v, kUnits[u]);
}

Result<std::vector<GpuId>> parse_gpu_selection(const Cluster& cluster, std::string_view sel) {
  std::vector<std::string_view> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= sel.size(); ++i) {
    if (i < sel.size() && sel[i] == '[') ++depth;
    if (i < sel.size() && sel[i] == ']') --depth;
    if (i == sel.size() || (sel[i] == ',' && depth == 0)) {
      items.push_back(sel.substr(start, i - start));
      start = i + 1;
    }
  }
  std::vector<GpuId> out;
  std::unordered_set<std::uint32_t> seen;
  for (std::string_view item : items) {
    if (item.empty())
      return make_error(
          ErrorCode::kInvalidArgument,
          fmt::format(
              "GPU selection '{}' has an empty item; expected NODE:INDEX, NODE:FIRST-LAST or a hostlist of whole nodes",
              sel));
    std::string_view nodes_part = item;
    std::optional<std::pair<int, int>> range;
    auto close = item.rfind(']');
    auto colon = item.rfind(':');
    if (colon != std::string_view::npos && (close == std::string_view::npos || colon > close)) {
      nodes_part = item.substr(0, colon);
      auto r = parse_index_range(item.substr(colon + 1), item);
      if (!r) return tl::unexpected(r.error());
      range = *r;
    }
    // Each name must be a distinct node of the cluster, so an expression naming more names
    // than the cluster has nodes is refused before millions of names are built.
    auto names = expand_hostlist(nodes_part, cluster.node_count());
    if (!names)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("in GPU selection item '{}' (cluster '{}' has {} nodes): {}", item,
                                    cluster.name(), cluster.node_count(), names.error().message));
    for (const std::string& name : *names) {
      auto node = cluster.find_node(name);
      if (!node)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("GPU selection: no node named '{}' in cluster '{}'", name, cluster.name()));
      const int count = cluster.node_gpu_count(*node);
      int lo = range ? range->first : 0, hi = range ? range->second : count - 1;
      if (hi >= count)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("GPU selection: node '{}' has GPUs 0..{}, not {}", name, count - 1, hi));
      for (int i = lo; i <= hi; ++i) {
        GpuId g = cluster.node_gpu(*node, i);
        if (!seen.insert(g.value).second)
          return make_error(ErrorCode::kInvalidArgument,
                            fmt::format("GPU selection: {}:{} is selected twice", name, i));
        out.push_back(g);
      }
    }
  }
  if (out.empty())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("GPU selection '{}' selects no GPU", sel));
  return out;
}

std::string gpu_label(const Cluster& cluster, GpuId gpu) {
  return fmt::format("{}:{}", cluster.node_name(cluster.gpu_node(gpu)), cluster.gpu_local_index(gpu));
}

}  // namespace toposched
