#include "sim/traces/alibaba_v2023.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sim/traces/csv.h"
#include "topology/hardware.h"

namespace toposched::sim {

namespace {
int qos_priority(std::string_view qos) {
  if (qos == "Guaranteed") return 3;
  if (qos == "LS") return 2;
  if (qos == "Burstable") return 1;
  return 0;  // BE and unknown
}
int column(const std::unordered_map<std::string, int>& idx, const char* name) {
  auto it = idx.find(name);
  return it == idx.end() ? -1 : it->second;
}
}  // namespace

Result<Trace> read_alibaba_v2023_pods(std::string_view text, const std::string& file, const TraceReadOptions& options) {
  Trace trace;
  trace.source = file;
  trace.format = "alibaba-v2023";
  csv::Reader reader(text, file);
  auto header = reader.next();
  if (!header) return tl::unexpected(header.error());
  if (!*header) return make_error(ErrorCode::kParse, "empty pod list: expected a header 'name,cpu_milli,memory_mib,num_gpu,...'", {file, 1, 1});
  const csv::Record& h = **header;
  auto idx = csv::header_index(h);
  int c_name = column(idx, "name"), c_gpu = column(idx, "num_gpu"), c_milli = column(idx, "gpu_milli");
  int c_spec = column(idx, "gpu_spec"), c_qos = column(idx, "qos"), c_create = column(idx, "creation_time");
  int c_delete = column(idx, "deletion_time"), c_sched = column(idx, "scheduled_time");
  if (c_name < 0 || c_gpu < 0)
    return make_error(ErrorCode::kParse, "not an Alibaba v2023 pod list: the header needs 'name' and 'num_gpu'", {file, h.line, 1});
  trace.has_times = c_create >= 0 && c_delete >= 0;

  auto rows = csv::read_job_rows(reader, h, trace, options, [&](const csv::Record& r, bool& ignored) -> Result<SimJob> {
    SimJob j;
    j.id = std::string(trim(r.fields[static_cast<std::size_t>(c_name)]));
    if (j.id.empty()) return csv::field_error(file, r, c_name, "expected a pod name, found an empty field");
    auto gpus = csv::to_int(file, r, c_gpu, "num_gpu");
    if (!gpus) return tl::unexpected(gpus.error());
    if (*gpus < 0 || *gpus > 1'000'000) return csv::field_error(file, r, c_gpu, fmt::format("num_gpu must be >= 0, found {}", *gpus));
    if (c_milli >= 0) {
      auto milli = csv::to_int(file, r, c_milli, "gpu_milli");
      if (!milli) return tl::unexpected(milli.error());
      if (*milli < 0 || *milli > 1000) return csv::field_error(file, r, c_milli, fmt::format("gpu_milli must be in 0..1000, found {}", *milli));
    }
    j.gpus = static_cast<int>(*gpus);
    if (c_spec >= 0) j.gpu_model = std::string(trim(r.fields[static_cast<std::size_t>(c_spec)]));
    if (c_qos >= 0) j.priority = qos_priority(trim(r.fields[static_cast<std::size_t>(c_qos)]));
    if (trace.has_times) {
      auto create = csv::to_double(file, r, c_create, "creation_time");
      if (!create) return tl::unexpected(create.error());
      auto del = csv::to_double(file, r, c_delete, "deletion_time");
      if (!del) return tl::unexpected(del.error());
      if (*create < 0) return csv::field_error(file, r, c_create, fmt::format("creation_time must be >= 0, found {}", *create));
      double start = *create;
      if (c_sched >= 0) {
        if (trim(r.fields[static_cast<std::size_t>(c_sched)]).empty()) {
          ignored = true;  // never scheduled: it never ran
        } else {
          auto s = csv::to_double(file, r, c_sched, "scheduled_time");
          if (!s) return tl::unexpected(s.error());
          start = *s;
        }
      }
      if (*del < *create)
        return csv::field_error(file, r, c_delete, fmt::format("deletion_time {} is before creation_time {}", *del, *create));
      j.submit_s = *create;
      j.duration_s = *del - start;
      if (!(j.duration_s > 0)) ignored = true;
    } else {
      j.submit_s = 0;
      j.duration_s = 1;
    }
    if (j.gpus == 0) ignored = true;
    return j;
  });
  if (!rows) return tl::unexpected(rows.error());
  if (auto ok = finalize_trace(trace); !ok) {
    Error e = ok.error();
    e.where.file = file;
    return tl::unexpected(e);
  }
  return trace;
}

// long: the node table's columns read per row, then the ToRs and node types built from them
Result<Cluster> read_alibaba_v2023_nodes(std::string_view text, const std::string& file, const AlibabaClusterOptions& options) {
  if (options.nodes_per_tor < 1 || !(options.tor_oversubscription >= 1)) return make_error(ErrorCode::kInvalidArgument, "nodes_per_tor must be >= 1 and tor_oversubscription >= 1");
  csv::Reader reader(text, file);
  auto header = reader.next();
  if (!header) return tl::unexpected(header.error());
  if (!*header) return make_error(ErrorCode::kParse, "empty node list: expected a header 'sn,cpu_milli,memory_mib,gpu,model'", {file, 1, 1});
  const csv::Record& h = **header;
  auto idx = csv::header_index(h);
  int c_sn = column(idx, "sn"), c_gpu = column(idx, "gpu"), c_model = column(idx, "model");
  if (c_sn < 0 || c_gpu < 0 || c_model < 0)
    return make_error(ErrorCode::kParse, "not an Alibaba v2023 node list: the header needs 'sn', 'gpu' and 'model'", {file, h.line, 1});

  ClusterBuilder b("alibaba-v2023");
  std::map<std::pair<std::string, int>, NodeTypeId> types;
  std::vector<NodeId> nodes;
  std::vector<int> node_lines;
  auto rows = csv::for_each_row(reader, h, [&](const csv::Record& r) -> Result<void> {
    std::string name(trim(r.fields[static_cast<std::size_t>(c_sn)]));
    if (name.empty()) return csv::field_error(file, r, c_sn, "expected a node name, found an empty field");
    auto gpus = csv::to_int(file, r, c_gpu, "gpu");
    if (!gpus) return tl::unexpected(gpus.error());
    if (*gpus < 1 || *gpus > 64) return csv::field_error(file, r, c_gpu, fmt::format("gpu must be in 1..64, found {}", *gpus));
    if (b.find_node(name)) return csv::field_error(file, r, c_sn, fmt::format("node '{}' appears twice", name));
    std::string model(trim(r.fields[static_cast<std::size_t>(c_model)]));
    if (model.empty()) return csv::field_error(file, r, c_model, "expected a GPU model, found an empty field");
    int count = static_cast<int>(*gpus);
    auto key = std::make_pair(model, count);
    auto it = types.find(key);
    if (it == types.end()) {
      NodeType t;
      t.name = fmt::format("{}x{}", model, count);
      t.gpu_model = model;
      t.gpu_count = count;
      // V100 (and the anonymised G2/G3) 8-GPU servers have NVLink; everything else PCIe.
      bool nvlink = count == 8 && (model.starts_with("V100") || model == "G2" || model == "G3");
      auto product = find_gpu_product(model.starts_with("V100") ? "V100" : model);
      t.gpu_memory_gb = product ? product->memory_gb : 0;
      t.pcie_GBps = pcie_GBps(3, 16);
      if (nvlink) {
        t.gpu_links = NodeType::full_nvlink_mesh(count, 2);
        t.nvlink_GBps_per_link = 25;
      } else {
        t.gpu_links.resize(static_cast<std::size_t>(count * count));
        for (int a = 0; a < count; ++a)
          for (int c = 0; c < count; ++c)
            t.gpu_links[static_cast<std::size_t>(a * count + c)] = {a == c ? LinkClass::kSelf : a / 4 == c / 4 ? LinkClass::kPhb : LinkClass::kSys, 0};
      }
      Nic nic;
      nic.name = "eth0";
      nic.gbit = options.nic_gbit;
      nic.gpu_affinity.assign(static_cast<std::size_t>(count), LinkClass::kPhb);
      t.nics.push_back(std::move(nic));
      it = types.emplace(key, b.add_node_type(std::move(t))).first;
    }
    nodes.push_back(b.add_node(name, it->second));
    node_lines.push_back(r.line);
    return {};
  });
  if (!rows) return tl::unexpected(rows.error());
  if (nodes.empty()) return make_error(ErrorCode::kValidation, "the node list holds no node", {file, h.line, 1});
  int tor = b.add_tier(Tier{"tor", 0, kDefaultHopLatencyUs, options.tor_oversubscription});
  std::size_t per = static_cast<std::size_t>(options.nodes_per_tor);
  std::size_t tors = (nodes.size() + per - 1) / per;
  std::vector<SwitchId> leafs;
  for (std::size_t s = 0; s < tors; ++s) {
    SwitchId sw = b.add_switch(fmt::format("tor-{:03d}", s + 1), tor);
    for (std::size_t n = s * per; n < std::min(nodes.size(), (s + 1) * per); ++n) b.attach(nodes[n], sw);
    leafs.push_back(sw);
  }
  if (tors > 1) {
    int spine = b.add_tier(Tier{"spine", 0, kDefaultHopLatencyUs, 1.0});
    SwitchId root = b.add_switch("spine", spine);
    for (SwitchId s : leafs) b.connect(s, root);
  }
  auto built = std::move(b).build();
  if (!built) {
    Error e = built.error();
    e.where.file = file;
    return tl::unexpected(e);
  }
  return built;
}

}  // namespace toposched::sim
