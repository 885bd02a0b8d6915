#include "formats/gres_conf.h"

#include <cctype>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "topology/hostlist.h"

namespace toposched {
namespace {

// "0-55,112-167" -> {0..55, 112..167}; nullopt when malformed.
std::optional<std::set<long>> parse_cpu_list(std::string_view text) {
  std::set<long> cpus;
  std::size_t p = 0;
  while (p < text.size()) {
    std::size_t comma = text.find(',', p);
    std::string_view part = text.substr(p, comma == std::string_view::npos ? std::string_view::npos : comma - p);
    std::size_t dash = part.find('-');
    long lo = 0, hi = 0;
    auto num = [](std::string_view s, long& v) {
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      return ec == std::errc() && ptr == s.data() + s.size() && v >= 0;
    };
    if (dash == std::string_view::npos) {
      if (!num(part, lo)) return std::nullopt;
      hi = lo;
    } else if (!num(part.substr(0, dash), lo) || !num(part.substr(dash + 1), hi) || hi < lo || hi - lo > 1'000'000) {
      return std::nullopt;
    }
    for (long v = lo; v <= hi; ++v) cpus.insert(v);
    if (comma == std::string_view::npos) break;
    p = comma + 1;
  }
  return cpus;
}

std::string format_cpu_list(const std::set<long>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    long lo = *it, hi = lo;
    for (++it; it != cpus.end() && *it == hi + 1; ++it) hi = *it;
    out += (out.empty() ? "" : ",") + (lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi));
  }
  return out;
}

}  // namespace

std::string gres_type_name(const NodeType& type, const ExportOptions& options) {
  std::string name = options.gres_type.empty() ? type.gpu_model : options.gres_type;
  // Slurm lower-cases and turns spaces into underscores; anything else that would break
  // `Gres=gpu:TYPE:N` or the key=value syntax becomes an underscore too.
  for (char& ch : name) {
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.' && ch != '_') ch = '_';
  }
  return name;
}

std::vector<std::string> gres_cores(const NodeType& t) {
  std::vector<std::string> out(static_cast<std::size_t>(t.gpu_count));
  std::vector<std::optional<std::set<long>>> sets;
  long max_cpu = -1;
  for (int g = 0; g < t.gpu_count; ++g) {
    auto idx = static_cast<std::size_t>(g);
    if (idx >= t.gpu_cpu_affinity.size() || t.gpu_cpu_affinity[idx].empty()) {
      sets.emplace_back(std::nullopt);
      continue;
    }
    sets.push_back(parse_cpu_list(t.gpu_cpu_affinity[idx]));
    if (sets.back() && !sets.back()->empty()) max_cpu = std::max(max_cpu, *sets.back()->rbegin());
  }
  // Hyperthread siblings: CPU i and i + N/2 share a core when every list is symmetric.
  long total = max_cpu + 1;
  bool siblings = total >= 2 && total % 2 == 0;
  for (const auto& s : sets) {
    if (!siblings || !s) continue;
    for (long cpu : *s) {
      long twin = cpu < total / 2 ? cpu + total / 2 : cpu - total / 2;
      if (!s->contains(twin)) siblings = false;
    }
  }
  for (std::size_t g = 0; g < sets.size(); ++g) {
    if (!sets[g]) continue;
    std::set<long> cores;
    for (long cpu : *sets[g])
      if (!siblings || cpu < total / 2) cores.insert(cpu);
    out[g] = format_cpu_list(cores);
  }
  return out;
}

Result<ExportOutput> write_gres_conf(const Cluster& c, const ExportOptions& options) {
  ExportOutput out;
  std::string& t = out.text;
  t += "# gres.conf GPU lines, as Slurm's NVML autodetection (AutoDetect=nvml) would describe these nodes.\n";
  t += "# " + generated_by(c) + "\n";
  t += "# Links= lists the NVLinks to each GPU of the node in index order (-1 = the GPU itself, 0 = no NVLink).\n";
  bool any = false;
  for (std::uint32_t ti = 0; ti < c.node_type_count(); ++ti) {
    const NodeType& type = c.node_type_at(NodeTypeId(ti));
    std::vector<std::string> nodes;
    for (std::uint32_t n = 0; n < c.node_count(); ++n)
      if (c.node_type_id(NodeId(n)).index() == ti) nodes.push_back(c.node_name(NodeId(n)));
    if (nodes.empty() || type.gpu_count == 0) continue;
    any = true;
    std::string hosts = compress_hostlist(nodes);
    std::string gtype = gres_type_name(type, options);
    std::vector<std::string> cores = gres_cores(type);
    t += fmt::format("\n# node type '{}': {} x {} GPUs; slurm.conf: NodeName={} Gres=gpu:{}{}\n", type.name, type.gpu_count,
                     type.gpu_model.empty() ? "unnamed" : type.gpu_model, hosts, gtype.empty() ? "" : gtype + ":", type.gpu_count);
    for (int g = 0; g < type.gpu_count; ++g) {
      std::string links;
      for (int k = 0; k < type.gpu_count; ++k) {
        int v = k == g ? -1 : type.link(g, k).cls == LinkClass::kNVLink ? type.link(g, k).nvlinks : 0;
        links += (links.empty() ? "" : ",") + std::to_string(v);
      }
      t += fmt::format("NodeName={} Name=gpu", hosts);
      if (!gtype.empty()) t += " Type=" + gtype;
      t += fmt::format(" File=/dev/nvidia{}", g);
      if (!cores[static_cast<std::size_t>(g)].empty()) t += " Cores=" + cores[static_cast<std::size_t>(g)];
      t += " Links=" + links + "\n";
    }
  }
  if (!any) out.warnings.push_back("the cluster has no GPUs: gres.conf lists nothing");
  return out;
}

}  // namespace toposched
