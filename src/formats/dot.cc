#include "formats/dot.h"

#include <fmt/format.h>

namespace toposched {
namespace {

std::string dot_id(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

void write_node(const Cluster& c, NodeId n, const std::string& indent, std::string& t) {
  std::string label = fmt::format("{}\n{} GPU{}", c.node_name(n), c.node_gpu_count(n), c.node_gpu_count(n) == 1 ? "" : "s");
  if (DomainId d = c.node_domain(n); d.valid()) label += "\n" + c.domain(d).name;
  t += fmt::format("{}{} [label={}];\n", indent, dot_id(c.node_name(n)), dot_id(label));
}

void write_switch(const Cluster& c, SwitchId s, int depth, std::string& t) {
  std::string indent(static_cast<std::size_t>(2 * depth), ' ');
  t += fmt::format("{}subgraph {} {{\n", indent, dot_id(fmt::format("cluster_{}", s.value)));
  t += fmt::format("{}  label={};\n", indent,
                   dot_id(fmt::format("{} ({})", c.switch_name(s), c.tiers()[static_cast<std::size_t>(c.switch_tier(s))].name)));
  for (SwitchId k : c.switch_children(s)) write_switch(c, k, depth + 1, t);
  for (NodeId n : c.switch_nodes(s)) write_node(c, n, indent + "  ", t);
  t += indent + "}\n";
}

}  // namespace

Result<ExportOutput> write_dot(const Cluster& c, const ExportOptions&) {
  ExportOutput out;
  std::string& t = out.text;
  t += "// Graphviz view of the cluster's fabric: render with 'dot -Tsvg'.\n";
  t += "// " + generated_by(c) + "\n";
  t += fmt::format("graph {} {{\n", dot_id(c.name()));
  t += "  graph [fontname=\"Helvetica\", style=rounded];\n";
  t += "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
  for (SwitchId root : c.root_switches()) write_switch(c, root, 1, t);
  for (std::uint32_t i = 0; i < c.node_count(); ++i)
    if (!c.node_switch(NodeId(i)).valid()) write_node(c, NodeId(i), "  ", t);
  t += "}\n";
  return out;
}

}  // namespace toposched
