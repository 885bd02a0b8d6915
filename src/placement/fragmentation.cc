#include "placement/fragmentation.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace toposched {

std::vector<JobSizeWeight> default_job_sizes() {
  return {{1, 0.25}, {2, 0.10}, {4, 0.15}, {8, 0.25}, {16, 0.10}, {32, 0.10}, {64, 0.05}};
}

Result<std::vector<JobSizeWeight>> parse_job_sizes(std::string_view text) {
  std::vector<JobSizeWeight> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    std::size_t colon = item.find(':');
    JobSizeWeight w;
    bool ok = colon != std::string_view::npos;
    if (ok) {
      auto [p1, e1] = std::from_chars(item.data(), item.data() + colon, w.gpus);
      auto [p2, e2] = std::from_chars(item.data() + colon + 1, item.data() + item.size(), w.weight);
      ok = e1 == std::errc() && p1 == item.data() + colon && e2 == std::errc() && p2 == item.data() + item.size() &&
           w.gpus > 0 && w.weight >= 0;
    }
    if (!ok)
      return make_error(
          ErrorCode::kInvalidArgument,
          fmt::format("expected job sizes as GPUS:WEIGHT[,GPUS:WEIGHT...] (e.g. 1:0.5,8:0.5), found '{}' at column {}",
                      item, start + 1));
    out.push_back(w);
    if (comma == text.size()) break;
    start = comma + 1;
  }
  double sum = 0;
  for (const auto& w : out) sum += w.weight;
  if (sum <= 0) return make_error(ErrorCode::kInvalidArgument, "job size weights must not all be zero");
  return out;
}

FragmentationReport fragmentation(const AllocationState& s, const std::vector<JobSizeWeight>& sizes) {
  const Cluster& c = s.cluster();
  FragmentationReport f;
  f.free_gpus = s.total_free_gpus();
  f.total_gpus = static_cast<long>(c.gpu_count());
  f.free_whole_nodes = s.total_free_nodes();
  f.total_nodes = static_cast<long>(c.node_count());
  LevelCapacity node_level{"node", 0, 0};
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    NodeId n(static_cast<std::uint32_t>(i));
    const int free = s.free_gpus(n);
    node_level.largest_free_gpus = std::max<long>(node_level.largest_free_gpus, free);
    if (s.node_whole_free(n)) node_level.largest_free_nodes = 1;
    if (free > 0 && !s.node_whole_free(n)) ++f.partially_used_nodes;
  }
  f.levels.push_back(node_level);
  for (std::size_t t = 0; t < c.tiers().size(); ++t) {
    LevelCapacity lv{c.tiers()[t].name, 0, 0};
    for (std::size_t i = 0; i < c.switch_count(); ++i) {
      SwitchId sw(static_cast<std::uint32_t>(i));
      if (c.switch_tier(sw) != static_cast<int>(t)) continue;
      lv.largest_free_gpus = std::max<long>(lv.largest_free_gpus, s.switch_free_gpus(sw));
      lv.largest_free_nodes = std::max<long>(lv.largest_free_nodes, s.switch_free_nodes(sw));
      if (t == 0) {
        ++f.total_leaves;
        if (s.switch_free_gpus(sw) == s.switch_total_gpus(sw)) ++f.free_whole_leaves;
      }
    }
    f.levels.push_back(lv);
  }
  if (c.domain_count() > 0) {
    LevelCapacity lv{"accel-domain", 0, 0};
    for (std::size_t d = 0; d < c.domain_count(); ++d) {
      DomainId id(static_cast<std::uint32_t>(d));
      ++f.total_domains;
      if (s.domain_free_gpus(id) == s.domain_total_gpus(id)) ++f.free_whole_domains;
      lv.largest_free_gpus = std::max<long>(lv.largest_free_gpus, s.domain_free_gpus(id));
      lv.largest_free_nodes = std::max<long>(lv.largest_free_nodes, s.domain_free_nodes(id));
    }
    f.levels.push_back(lv);
  }
  f.levels.push_back({"cluster", f.free_gpus, f.free_whole_nodes});

  // Expected unusable free GPUs over the size distribution: a node's free GPUs are unusable
  // by a job of m GPUs when m fits a node but not its free GPUs, or when m needs several
  // nodes (which must be whole) and the node is not wholly free.
  double expected = 0;
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    NodeId n(static_cast<std::uint32_t>(i));
    expected += expected_unusable_on_node(s.free_gpus(n), c.node_gpu_count(n), sizes);
  }
  f.expected_unusable_gpus = expected;
  f.unusable_fraction = f.free_gpus > 0 ? f.expected_unusable_gpus / static_cast<double>(f.free_gpus) : 0;
  return f;
}

double expected_unusable_on_node(int free, int node_gpus, const std::vector<JobSizeWeight>& sizes) {
  if (free <= 0) return 0;
  double weight_sum = 0, unusable = 0;
  for (const auto& w : sizes) {
    weight_sum += w.weight;
    const bool usable = w.gpus <= node_gpus ? free >= w.gpus : free == node_gpus;
    if (!usable) unusable += w.weight * free;
  }
  return weight_sum > 0 ? unusable / weight_sum : 0;
}

nlohmann::ordered_json fragmentation_to_json(const FragmentationReport& f, const std::vector<JobSizeWeight>& sizes) {
  using Json = nlohmann::ordered_json;
  Json out;
  out["free_gpus"] = f.free_gpus;
  out["total_gpus"] = f.total_gpus;
  out["free_whole_nodes"] = f.free_whole_nodes;
  out["total_nodes"] = f.total_nodes;
  out["partially_used_nodes"] = f.partially_used_nodes;
  out["free_whole_leaves"] = f.free_whole_leaves;
  out["total_leaves"] = f.total_leaves;
  out["free_whole_domains"] = f.free_whole_domains;
  out["total_domains"] = f.total_domains;
  Json levels = Json::array();
  for (const auto& l : f.levels)
    levels.push_back(
        {{"level", l.level}, {"largest_free_gpus", l.largest_free_gpus}, {"largest_free_nodes", l.largest_free_nodes}});
  out["largest_placeable"] = std::move(levels);
  Json dist = Json::array();
  for (const auto& s : sizes) dist.push_back({{"gpus", s.gpus}, {"weight", s.weight}});
  out["job_sizes"] = std::move(dist);
  out["expected_unusable_gpus"] = f.expected_unusable_gpus;
  out["unusable_fraction"] = f.unusable_fraction;
  return out;
}

}  // namespace toposched
