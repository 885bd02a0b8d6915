#include "formats/nfd.h"

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "formats/k8s_labels.h"
#include "formats/yaml_output.h"
#include "topology/text.h"

namespace toposched {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kApiVersion = "nfd.k8s-sigs.io/v1alpha1";
constexpr std::string_view kFeatureSet = "topograph.network";
constexpr std::string_view kFabricKind = "fabric-tier-";

// The first 8 hex digits of SHA-256 (OpenSSL's EVP digest).
std::string short_sha256(std::string_view value) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(value.data(), value.size(), digest, &length, EVP_sha256(), nullptr);
  return fmt::format("{:02x}{:02x}{:02x}{:02x}", digest[0], digest[1], digest[2], digest[3]);
}

// `text` without '-' at either end.
std::string trim_dashes(std::string_view text) {
  const std::size_t first = text.find_first_not_of('-');
  return first == std::string_view::npos ? "" : std::string(text.substr(first, text.find_last_not_of('-') - first + 1));
}

// Topograph's dnsLabelPart: lower case, each run of characters outside [a-z0-9] one '-'.
std::string dns_label_part(std::string_view value) {
  std::string out;
  bool last_dash = false;
  for (char c : ascii_lower(value)) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      out += c;
      last_dash = false;
    } else if (!last_dash) {
      out += '-';
      last_dash = true;
    }
  }
  return trim_dashes(out);
}

// The NFD attribute a topology label stands for: fabric-tier-N, accelerator-domain,
// accelerator-sub-domain; empty for other labels (the node type).
std::string kind_of_label(std::string_view key) {
  if (key == kAcceleratorDomainLabel) return "accelerator-domain";
  if (key == kAcceleratorSubDomainLabel) return "accelerator-sub-domain";
  if (key.starts_with(kFabricTierLabelPrefix)) return std::string(kFabricKind) + std::string(key.substr(kFabricTierLabelPrefix.size()));
  return "";
}

Json object_labels(std::initializer_list<std::pair<std::string_view, std::string_view>> extra) {
  std::map<std::string, std::string> sorted = {{"app.kubernetes.io/managed-by", "topograph"},
                                               {"topograph.run/engine", "nfd"}};
  for (const auto& [k, v] : extra) sorted[std::string(k)] = std::string(v);
  Json labels = Json::object();
  for (const auto& [k, v] : sorted) labels[k] = v;
  return labels;
}

Json node_feature(const std::string& node, const std::map<std::string, std::string>& elements,
                  const std::string& ns) {
  Json topology = Json::object();
  for (const auto& [kind, value] : elements) topology[kind] = value;
  return Json{{"apiVersion", kApiVersion},
              {"kind", "NodeFeature"},
              {"metadata",
               {{"name", nfd_object_name("topograph-node", node)},
                {"namespace", ns},
                {"labels", object_labels({{"nfd.node.kubernetes.io/node-name", node},
                                          {"topograph.run/resource", "nodefeature"}})},
                {"annotations", {{"topograph.run/node-name", node}}}}},
              {"spec",
               {{"features",
                 {{"attributes",
                   {{"system.name", {{"elements", {{"nodename", node}}}}},
                    {kFeatureSet, {{"elements", std::move(topology)}}}}}}}}}};
}

Json node_feature_group(const std::string& kind, const std::string& value, const std::string& label_key,
                        const std::string& ns) {
  return Json{{"apiVersion", kApiVersion},
              {"kind", "NodeFeatureGroup"},
              {"metadata",
               {{"name", nfd_object_name("topograph-" + kind, value)},
                {"namespace", ns},
                {"labels", object_labels({{"topograph.run/group-type", kind},
                                          {"topograph.run/resource", "nodefeaturegroup"}})},
                {"annotations", {{"topograph.run/label-key", label_key}, {"topograph.run/label-value", value}}}}},
              {"spec",
               {{"featureGroupRules",
                 Json::array({{{"name", fmt::format("{} equals {}", kind, value)},
                               {"matchFeatures",
                                Json::array({{{"feature", kFeatureSet},
                                              {"matchExpressions",
                                               {{kind, {{"op", "In"}, {"value", Json::array({value})}}}}}}})}}})}}}};
}

}  // namespace

std::string nfd_object_name(std::string_view prefix, std::string_view value) {
  std::string head = dns_label_part(prefix);
  if (head.empty()) head = "topograph";
  const std::string hash = short_sha256(value);
  std::string part = dns_label_part(value);
  if (part.empty()) part = "value";
  const std::size_t room = std::max<std::ptrdiff_t>(1, 63 - static_cast<std::ptrdiff_t>(head.size() + hash.size() + 2));
  if (part.size() > room) {
    part = trim_dashes(std::string_view(part).substr(0, room));
    if (part.empty()) part = "value";
  }
  return fmt::format("{}-{}-{}", head, part, hash);
}

Result<ExportOutput> write_nfd(const Cluster& c, const ExportOptions& options) {
  ExportOutput out;
  TOPOSCHED_TRY(labels, node_labels(c, options, &out.warnings));
  std::map<std::string, std::map<std::string, std::string>> nodes;        // node -> kind -> value
  std::map<std::string, std::map<std::string, std::string>> group_keys;   // kind -> value -> label key
  for (auto& [node, kv] : labels) {
    if (!is_valid_k8s_label_value(node))
      return make_error(ErrorCode::kValidation,
                        fmt::format("node name '{}' cannot be the label value nfd.node.kubernetes.io/node-name (at most "
                                    "63 characters); map it with --k8s-node-name-map",
                                    node));
    std::map<std::string, std::string> elements;
    for (const auto& [key, value] : kv) {
      const std::string kind = kind_of_label(key);
      if (kind.empty() || value.empty()) continue;
      elements[kind] = value;
      group_keys[kind][value] = key;
    }
    if (!elements.empty()) nodes[node] = std::move(elements);
  }
  const std::string& ns = options.nfd_namespace;
  std::vector<Json> docs;
  for (const auto& [node, elements] : nodes) docs.push_back(node_feature(node, elements, ns));
  std::size_t groups = 0;
  for (const auto& [kind, values] : group_keys)
    for (const auto& [value, key] : values) {
      docs.push_back(node_feature_group(kind, value, key, ns));
      ++groups;
    }
  if (nodes.size() < c.node_count())
    out.warnings.push_back(fmt::format("{} node(s) under no switch and in no accelerator domain get no NodeFeature",
                                       c.node_count() - nodes.size()));
  std::string& t = out.text;
  t += fmt::format("# Node Feature Discovery objects as Topograph's nfd engine writes them: {} NodeFeature(s), {} "
                   "NodeFeatureGroup(s) in namespace {}.\n# Needs NFD with the NodeFeatureGroupAPI feature gate; NFD "
                   "master fills each group's status.nodes.\n# {}\n",
                   nodes.size(), groups, ns, generated_by(c));
  for (const auto& w : out.warnings) t += "# note: " + w + "\n";
  if (docs.empty()) out.warnings.push_back("the cluster has no switches or accelerator domains: no NFD object to write");
  for (std::size_t i = 0; i < docs.size(); ++i) t += (i ? "---\n" : "") + json_to_yaml(docs[i]);
  return out;
}

}  // namespace toposched
