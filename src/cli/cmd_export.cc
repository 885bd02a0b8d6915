// `toposched export`: writes a cluster in a scheduler's own format (docs/export.md).
#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/common.h"
#include "formats/exporter.h"
#include "formats/topograph_export.h"
#include "topology/file_io.h"

namespace toposched::cli {

namespace {
struct ExportCliOptions {
  std::string cluster;
  std::string to;
  std::string output = "-";
  std::string block_sizes;
  std::string style = "kubectl";
  std::string members = "exact";
  std::string gres_type;
  std::string name;
  bool skeleton_only = false;
  bool name_shortener = false;
  std::vector<std::string> block_name;  // REGEX FORMAT
  std::string topologies;               // FILE
  std::string kueue_version = "v1beta2";
  std::string nfd_namespace = "node-feature-discovery";
  std::string node_name_map;            // FILE
  OutputFormat format = OutputFormat::kText;
  // Format-specific options the user gave, with the formats that read them.
  std::vector<std::pair<std::string, std::vector<std::string>>> given;
};

Result<std::vector<long>> parse_sizes(const std::string& text) {
  std::vector<long> sizes;
  if (text.empty()) return sizes;
  std::size_t p = 0;
  while (true) {
    std::size_t comma = text.find(',', p);
    std::string_view part = std::string_view(text).substr(p, comma == std::string::npos ? std::string::npos : comma - p);
    long v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size())
      return make_error(ErrorCode::kInvalidArgument, fmt::format("--block-sizes: expected comma-separated node counts such as 18,36,72, found '{}'", part));
    sizes.push_back(v);
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  return sizes;
}

// A Kubernetes namespace name: a DNS-1123 label (an object name without dots, at most 63).
const CLI::Validator kNamespaceName(
    [](std::string& v) {
      if (is_valid_k8s_object_name(v, 63) && v.find('.') == std::string::npos) return std::string();
      return "expected a Kubernetes namespace (a DNS-1123 label: lower case letters, digits and '-', at most 63 "
             "characters), found '" + v + "'";
    },
    "", "namespace");

int run_export(const ExportCliOptions& o) {
  for (const auto& [option, formats] : o.given)
    if (std::find(formats.begin(), formats.end(), o.to) == formats.end())
      return usage_error(fmt::format("{} applies to --to {}, not to --to {}", option, fmt::join(formats, " or "), o.to));
  ExportOptions options;
  auto sizes = parse_sizes(o.block_sizes);
  if (!sizes) return report(sizes.error());
  if (auto valid = validate_block_sizes(*sizes); !valid) {
    Error e = valid.error();
    e.message = "--block-sizes: " + e.message;
    return report(e);
  }
  options.block_sizes = *sizes;
  options.label_style = o.style == "patch" ? LabelStyle::kPatch : LabelStyle::kKubectl;
  options.member_style = o.members == "regex" ? MemberStyle::kRegex : MemberStyle::kExact;
  options.gres_type = o.gres_type;
  options.object_name = o.name;
  options.kueue_version = o.kueue_version;
  options.nfd_namespace = o.nfd_namespace;
  if (!o.node_name_map.empty()) {
    auto names = read_k8s_node_name_map(o.node_name_map);
    if (!names) return report(names.error());
    options.k8s_node_names = std::move(*names);
  }
  options.skeleton_only = o.skeleton_only;
  options.name_shortener = o.name_shortener;
  if (o.block_name.size() == 2) options.block_name = BlockNameRule{o.block_name[0], o.block_name[1]};
  if (!o.topologies.empty()) {
    auto text = read_text_file(o.topologies);
    if (!text) return report(text.error());
    auto topologies = read_topologies(*text, o.topologies);
    if (!topologies) return report(topologies.error());
    options.topologies = std::move(*topologies);
  }
  int code = kExitOk;
  if (!output_usable_or_report(o.output, code)) return code;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  auto out = export_cluster(*c, o.to, options);
  if (!out) return report(out.error());
  for (const auto& w : out->warnings) std::cerr << "toposched: warning: " << w << "\n";
  if (o.format == OutputFormat::kJson) {
    Json j;
    j["format"] = o.to;
    j["cluster"] = c->name();
    if (o.output != "-") {
      auto written = write_file_atomically(o.output, out->text);
      if (!written) return report(written.error());
      j["output"] = o.output;
    } else {
      j["content"] = out->text;
    }
    j["warnings"] = out->warnings;
    return print_json(j);
  }
  auto written = write_file_atomically(o.output, out->text);
  if (!written) return report(written.error());
  return kExitOk;
}
}  // namespace

void register_export(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ExportCliOptions>();
  CLI::App* cmd = app.add_subcommand("export", "Write the cluster's topology for Slurm, Kubernetes schedulers or Graphviz");
  cmd->add_option("--cluster,-c", opts->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  std::vector<std::string> names;
  std::string list;
  for (const auto& f : export_formats().rows()) {
    names.emplace_back(f.name);
    list += fmt::format("  {:<12} {}\n", f.name, f.description);
  }
  // Slurm 26.05's topology/ring and topology/torus3d lay nodes out on rings of at most 16
  // nodes and on 3-D tori with placement shapes (topology.yaml(5)): node-to-node links, which
  // toposched's model (switch trees and NVLink domains) does not have. Said plainly rather
  // than "not in {...}", since a Slurm user will look for them here.
  const CLI::Validator not_ring_or_torus(
      [](std::string& to) -> std::string {
        if (to != "slurm-ring" && to != "slurm-torus3d") return {};
        return to + ": Slurm's topology/" + to.substr(6) +
               " describes nodes linked to each other in rings or a 3-D torus; toposched's cluster model has switch "
               "trees and NVLink domains, which slurm-tree, slurm-block and slurm-yaml export (docs/export.md)";
      },
      "", "ring-torus");
  cmd->add_option("--to", opts->to, "Target format (see below)")
      ->required()
      ->check(not_ring_or_torus)
      ->check(CLI::IsMember(names))
      ->option_text("FORMAT");
  cmd->add_option("--output,-o", opts->output, "Write to FILE (atomically) instead of stdout")->option_text("FILE");
  CLI::Option* block_sizes = cmd->add_option("--block-sizes", opts->block_sizes,
                  "slurm-block, slurm-yaml: BlockSizes as N,2N,4N,...: domains are cut into blocks of N with empty placeholders, "
                  "as Topograph does (default: inferred from sub-domains, else the smallest block doubled while the block count allows)")
      ->option_text("LIST");
  CLI::Option* style = cmd->add_option("--style", opts->style, "k8s-labels: 'kubectl' (a sh script of kubectl label) or 'patch' (JSON merge patches per node)")
      ->check(CLI::IsMember({"kubectl", "patch"}))->option_text("kubectl|patch");
  CLI::Option* members = cmd->add_option("--members", opts->members, "volcano: list nodes one by one ('exact') or as one regex per HyperNode ('regex')")
      ->check(CLI::IsMember({"exact", "regex"}))->option_text("exact|regex");
  CLI::Option* gres_type = cmd->add_option("--gres-type", opts->gres_type, "gres: Type= of the GPUs (default: the GPU model, lower-cased)")->option_text("TYPE");
  CLI::Option* name = cmd->add_option("--name", opts->name, "kueue, kai: name of the Topology object (default: the cluster's name)")->option_text("NAME");
  CLI::Option* skeleton = cmd->add_flag("--skeleton-only", opts->skeleton_only,
      "slurm-tree, slurm-block, slurm-yaml: the structure without node lists (Topograph's skeletonOnly)");
  CLI::Option* shortener = cmd->add_flag("--name-shortener", opts->name_shortener,
      "slurm-tree: name switches switch.LEVEL.N (level 1 = leaves) as Topograph's shortener does, each line preceded by '# switch.L.N=<name>'");
  CLI::Option* block_name = cmd->add_option("--block-name", opts->block_name,
      "slurm-block, slurm-yaml: name each block from its nodes' names: REGEX (RE2/Go syntax, searched in each node name) and "
      "FORMAT with $1, ${1}, ${name} (Topograph's blockName); every node of a block must give the same name")
      ->expected(2)->option_text("REGEX FORMAT");
  CLI::Option* topologies = cmd->add_option("--topologies", opts->topologies,
      "slurm-yaml: a YAML/JSON file with Topograph's 'topologies' (NAME: {plugin: topology/tree|block|flat, nodes: [hostlists], "
      "blockSizes, blockName, clusterDefault}), one topology per partition")
      ->check(CLI::ExistingFile)->option_text("FILE");
  CLI::Option* kueue_version = cmd->add_option("--kueue-version", opts->kueue_version,
      "kueue: Topology API version: v1beta2 (Kueue v0.15 and later, the default), v1beta1 (v0.14 on, deprecated "
      "since v0.16) or v1alpha1 (v0.9 to v0.13)")
      ->check(CLI::IsMember({"v1beta2", "v1beta1", "v1alpha1"}))->option_text("VERSION");
  CLI::Option* nfd_namespace = cmd->add_option("--namespace", opts->nfd_namespace,
      "nfd: namespace of the NodeFeature and NodeFeatureGroup objects, NFD master's (default node-feature-discovery)")
      ->check(kNamespaceName)->option_text("NAME");
  CLI::Option* node_name_map = cmd->add_option("--k8s-node-name-map", opts->node_name_map,
      "k8s-labels, volcano, nfd: YAML/JSON mapping {spec node name: Kubernetes node name}, for nodes whose spec name is "
      "not their Kubernetes name (names Kubernetes refuses, such as GPU-A01 or gpu_b01, are an error otherwise)")
      ->check(CLI::ExistingFile)->option_text("FILE");
  add_format_option(*cmd, opts->format);
  cmd->footer("Formats:\n" + list +
              "\nText output is the target format itself. With --format json, stdout gets\n"
              "{\"format\",\"cluster\",\"content\" (or \"output\" with -o),\"warnings\"}. Warnings (e.g. nodes under no switch)\n"
              "go to stderr. Details and examples of every format: docs/export.md.\n"
              "Example: toposched export -c 'preset:dgx-h100?nodes=64' --to slurm-tree -o topology.conf\n"
              "Example: toposched export -c tests/data/topograph/models/nvl72.yaml --to slurm-block --block-sizes 18,36,72");
  cmd->callback([=, &exit_code] {
    const std::pair<CLI::Option*, std::vector<std::string>> specific[] = {
        {block_sizes, {"slurm-block", "slurm-yaml"}}, {style, {"k8s-labels"}}, {members, {"volcano"}},
        {gres_type, {"gres"}}, {name, {"kueue", "kai"}}, {skeleton, {"slurm-tree", "slurm-block", "slurm-yaml"}},
        {shortener, {"slurm-tree"}}, {block_name, {"slurm-block", "slurm-yaml"}}, {topologies, {"slurm-yaml"}},
        {kueue_version, {"kueue"}}, {nfd_namespace, {"nfd"}}, {node_name_map, {"k8s-labels", "volcano", "nfd"}}};
    for (const auto& [option, formats] : specific)
      if (option->count() > 0) opts->given.emplace_back(option->get_name(), formats);
    exit_code = run_export(*opts);
  });
}

}  // namespace toposched::cli
