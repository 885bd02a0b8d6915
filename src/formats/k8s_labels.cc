#include "formats/k8s_labels.h"

#include "formats/json_output.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace toposched {
namespace {

// Single-quotes a word for sh unless it is plainly safe.
std::string shell_word(const std::string& s) {
  bool safe = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/=:,") == std::string::npos;
  if (safe) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::vector<std::map<std::string, std::string>> topology_labels(const Cluster& c, std::vector<std::string>* warnings) {
  std::vector<std::map<std::string, std::string>> out;
  // Two different names that become the same label value would merge two switches.
  std::map<std::pair<std::string, std::string>, std::string> origin;
  std::set<std::string> reported;
  auto value = [&](const std::string& key, const std::string& name) {
    std::string v = k8s_label_value(name);
    auto [it, fresh] = origin.emplace(std::make_pair(key, v), name);
    if (!fresh && it->second != name && warnings) {
      std::string w = fmt::format("'{}' and '{}' both become label value '{}' for {}", it->second, name, v, key);
      if (reported.insert(w).second) warnings->push_back(w);
    }
    return v;
  };
  for (std::uint32_t i = 0; i < c.node_count(); ++i) {
    NodeId n(i);
    std::map<std::string, std::string> labels;
    for (SwitchId s = c.node_switch(n); s.valid(); s = c.switch_parent(s))
      labels[fabric_tier_label(c.switch_tier(s))] = value(fabric_tier_label(c.switch_tier(s)), c.switch_name(s));
    if (DomainId d = c.node_domain(n); d.valid()) {
      labels[std::string(kAcceleratorDomainLabel)] = value(std::string(kAcceleratorDomainLabel), c.domain(d).name);
      if (!c.node_sub_domain(n).empty())
        labels[std::string(kAcceleratorSubDomainLabel)] = value(std::string(kAcceleratorSubDomainLabel), c.node_sub_domain(n));
    }
    labels[std::string(kNodeTypeLabel)] = value(std::string(kNodeTypeLabel), c.node_type(n).name);
    out.push_back(std::move(labels));
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::map<std::string, std::string>>>> node_labels(
    const Cluster& c, const ExportOptions& options, std::vector<std::string>* warnings) {
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> out;
  auto labels = topology_labels(c, warnings);
  for (std::uint32_t i = 0; i < c.node_count(); ++i) {
    TOPOSCHED_TRY(name, k8s_node_name(c, NodeId(i), options));
    out.emplace_back(std::move(name), std::move(labels[i]));
  }
  return out;
}

Result<ExportOutput> write_k8s_labels(const Cluster& c, const ExportOptions& options) {
  ExportOutput out;
  TOPOSCHED_TRY(labels, node_labels(c, options, &out.warnings));
  if (options.label_style == LabelStyle::kPatch) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::object();
    for (const auto& [node, kv] : labels) {
      nlohmann::ordered_json l = nlohmann::ordered_json::object();
      for (const auto& [k, v] : kv) l[k] = v;
      doc[node] = {{"metadata", {{"labels", l}}}};
    }
    TOPOSCHED_TRY(text, dump_json(doc, 2));
    out.text = std::move(text) + "\n";
    return out;
  }
  std::string& t = out.text;
  t += "#!/bin/sh\n";
  t += "# Kubernetes node labels with Topograph's keys (fabric.topograph.run/tier-N: tier 0 is closest to the node).\n";
  t += "# " + generated_by(c) + "\n";
  t += "# Run with a kubeconfig that may label nodes; --overwrite replaces older values.\n";
  for (const auto& w : out.warnings) t += "# note: " + w + "\n";
  t += "set -e\n";
  for (const auto& [node, kv] : labels) {
    t += "kubectl label node " + shell_word(node) + " --overwrite";
    for (const auto& [k, v] : kv) t += " " + shell_word(k + "=" + v);
    t += "\n";
  }
  return out;
}

}  // namespace toposched
