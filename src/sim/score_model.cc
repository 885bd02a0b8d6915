#include "sim/score_model.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace toposched::sim {

namespace {

tl::unexpected<Error> spec_error(std::string_view source, int column, std::string message) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message), SourceLocation{std::string(source), 1, column});
}

// "0.7", "-30%", "+30%": a factor; nullopt when malformed.
std::optional<double> parse_number(std::string_view text, bool percent_allowed) {
  bool percent = percent_allowed && !text.empty() && text.back() == '%';
  if (percent) text.remove_suffix(1);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return percent ? 1 + v / 100 : v;
}

}  // namespace

Result<ScoreModel> parse_score_model(std::string_view spec, std::string_view source) {
  ScoreModel out;
  out.spec = std::string(spec);
  if (spec.empty()) return spec_error(source, 1, "empty score model; expected e.g. 'bw:spine=-30%', 'lat:all=1.3', 'hop-us=1' or 'none'");
  std::size_t pos = 0;
  bool saw_none = false;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view term = spec.substr(pos, comma - pos);
    const int col = static_cast<int>(pos) + 1;
    if (term.empty()) return spec_error(source, col, "empty term (two commas, or a comma at an end)");
    if (term == "none") {
      saw_none = true;
    } else {
      const std::size_t eq = term.find('=');
      if (eq == std::string_view::npos)
        return spec_error(source, col, fmt::format("'{}': expected bw:TIER=F, lat:TIER=F, hop-us=X or none", term));
      const std::string_view key = term.substr(0, eq), value = term.substr(eq + 1);
      const int value_col = col + static_cast<int>(eq) + 1;
      ScoreModelTerm t;
      t.column = col;
      if (key == "hop-us") {
        t.kind = ScoreModelTerm::Kind::kHopUs;
        auto v = parse_number(value, false);
        if (!v || *v < 0) return spec_error(source, value_col, fmt::format("hop-us: expected microseconds >= 0, got '{}'", value));
        t.value = *v;
      } else if (key.starts_with("bw:") || key.starts_with("lat:")) {
        t.kind = key.starts_with("bw:") ? ScoreModelTerm::Kind::kBandwidth : ScoreModelTerm::Kind::kLatency;
        t.target = std::string(key.substr(key.find(':') + 1));
        if (t.target.empty()) return spec_error(source, col, fmt::format("'{}': no tier named (a tier of the cluster, or all)", term));
        if (t.target == "nvlink" && t.kind == ScoreModelTerm::Kind::kLatency)
          return spec_error(source, col, "lat:nvlink is not modelled; nvlink takes bw: only");
        auto v = parse_number(value, true);
        if (!v || !(*v > 0))
          return spec_error(source, value_col,
                            fmt::format("{}: expected a factor > 0 (0.7) or a percentage above -100% (-30%), got '{}'", key, value));
        t.value = *v;
      } else {
        return spec_error(source, col, fmt::format("unknown term '{}'; expected bw:TIER=F, lat:TIER=F, hop-us=X or none", key));
      }
      out.terms.push_back(std::move(t));
    }
    pos = comma + 1;
  }
  if (saw_none && !out.terms.empty()) return spec_error(source, 1, "'none' cannot be combined with other terms");
  return out;
}

Result<Cluster> perturbed_cluster(const Cluster& c, const ScoreModel& model, std::string_view source) {
  std::vector<Tier> tiers = c.tiers();
  double nvlink = 1;
  for (const ScoreModelTerm& t : model.terms) {
    if (t.kind == ScoreModelTerm::Kind::kHopUs) {
      for (Tier& tier : tiers) tier.hop_latency_us += t.value;
      continue;
    }
    if (t.target == "nvlink") {
      nvlink *= t.value;
      continue;
    }
    bool found = false;
    for (Tier& tier : tiers) {
      if (t.target != "all" && tier.name != t.target) continue;
      found = true;
      (t.kind == ScoreModelTerm::Kind::kBandwidth ? tier.path_bandwidth_factor : tier.path_latency_factor) *= t.value;
    }
    if (!found) {
      std::string known;
      for (const Tier& tier : tiers) known += tier.name + ", ";
      return spec_error(source, t.column,
                        fmt::format("cluster {} has no tier '{}' (its tiers: {}all, nvlink)", c.name(), t.target, known));
    }
  }
  // The same entities in the same order, so every id means the same thing in both.
  ClusterBuilder b(c.name());
  for (std::size_t i = 0; i < c.node_type_count(); ++i) {
    NodeType type = c.node_type_at(NodeTypeId(static_cast<std::uint32_t>(i)));
    type.nvlink_GBps_per_link *= nvlink;
    b.add_node_type(std::move(type));
  }
  for (Tier& t : tiers) b.add_tier(std::move(t));
  for (std::size_t s = 0; s < c.switch_count(); ++s) {
    const SwitchId id(static_cast<std::uint32_t>(s));
    b.add_switch(c.switch_name(id), c.switch_tier(id));
  }
  for (std::size_t s = 0; s < c.switch_count(); ++s) {
    const SwitchId id(static_cast<std::uint32_t>(s));
    if (c.switch_parent(id).valid()) b.connect(id, c.switch_parent(id));
  }
  for (std::size_t d = 0; d < c.domain_count(); ++d) b.add_domain(c.domain(DomainId(static_cast<std::uint32_t>(d))));
  for (std::size_t n = 0; n < c.node_count(); ++n) {
    const NodeId id(static_cast<std::uint32_t>(n));
    b.add_node(c.node_name(id), c.node_type_id(id));
  }
  for (std::size_t n = 0; n < c.node_count(); ++n) {
    const NodeId id(static_cast<std::uint32_t>(n));
    if (c.node_switch(id).valid()) b.attach(id, c.node_switch(id));
    if (c.node_domain(id).valid()) b.add_to_domain(id, c.node_domain(id), c.node_sub_domain(id));
  }
  b.set_cross_root(c.cross_root_bandwidth_GBps(), c.cross_root_latency_us());
  auto out = std::move(b).build();
  if (!out) return spec_error(source, 1, fmt::format("the perturbed model of {} is not a valid cluster: {}", c.name(), out.error().message));
  return out;
}

}  // namespace toposched::sim
