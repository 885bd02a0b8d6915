// `toposched discover`: reads what the tools already say about a cluster and writes one
// native cluster spec. All the work is formats/discover.h; this file maps options.
#include <fmt/format.h>

#include "cli/common.h"
#include "formats/discover.h"
#include "formats/native_spec.h"
#include "slurm/slurm_nodes.h"
#include "topology/file_io.h"

namespace toposched::cli {

namespace {
struct DiscoverOptions {
  DiscoverRequest request;
  std::string hca;
  std::string compute_nics;
  std::vector<std::string> slurm_nodes;  // scontrol -o show node / sinfo --json files
  std::string output = "-";
  OutputFormat format = OutputFormat::kText;
};

// The Slurm node lists, read through the slurm layer into the request.
Result<void> read_slurm_node_lists(DiscoverOptions& o) {
  for (const auto& file : o.slurm_nodes) {
    TOPOSCHED_TRY(text, read_text_file(file));
    TOPOSCHED_TRY(nodes, slurm::read_slurm_nodes(text, file));
    o.request.read_sources.push_back(std::move(nodes));
  }
  return {};
}

int run_discover(DiscoverOptions& o) {
  DiscoverRequest& r = o.request;
  if (!o.hca.empty()) r.hca_regex = o.hca;
  if (!o.compute_nics.empty()) r.topo.compute_nic_regex = o.compute_nics;
  if (r.topo_m.empty() && r.fabric.empty() && r.gpu_info.empty() && r.ibnetdiscover.empty() && r.slurm_topology.empty() &&
      r.topograph_models.empty() && r.k8s_nodes.empty() && r.aws_topology.empty() && r.gcp_instances.empty() &&
      r.oci_compute_hosts.empty() && r.oci_rdma_topology.empty() && r.resource_slices.empty() &&
      o.slurm_nodes.empty())
    return usage_error(
        "discover needs at least one input (--topo-m, --fabric, --gpu-info, --ibnetdiscover, --slurm-topology, "
        "--slurm-nodes, --topograph-model, --k8s-nodes, --resource-slices, --aws-topology, --gcp-instances, "
        "--oci-compute-hosts or --oci-rdma-topology); see 'toposched discover --help'");
  int code = kExitOk;
  if (!output_usable_or_report(o.output, code)) return code;
  if (auto read = read_slurm_node_lists(o); !read) return report(read.error());
  auto result = discover(r);
  if (!result) return report(result.error());
  for (const auto& w : result->warnings) std::cerr << "toposched: warning: " << w << "\n";
  const Result<std::string> text = o.format == OutputFormat::kJson ? write_native_json(result->cluster)
                                                                   : Result<std::string>(write_native_yaml(result->cluster));
  if (!text) return report(text.error());
  if (auto ok = write_file_atomically(o.output, *text); !ok) return report(ok.error());
  if (o.output != "-")
    std::cerr << fmt::format(
        "toposched: wrote {}: {} nodes, {} GPUs, {} switches, {} accelerator domains, {} warnings\n", o.output,
        result->cluster.node_count(), result->cluster.gpu_count(), result->cluster.switch_count(),
        result->cluster.domain_count(), result->warnings.size());
  return kExitOk;
}

// The inputs: per-node files, whole-cluster sources and how labels map to roles.
void add_input_options(CLI::App& cmd, DiscoverOptions& o) {
  DiscoverRequest& r = o.request;
  cmd.add_option("--topo-m", r.topo_m,
                  "`nvidia-smi topo -m` output of one node: a FILE named after the node (dgx01.topo -> dgx01), or a "
                  "DIR of such files. Repeatable")
      ->type_name("FILE|DIR");
  cmd.add_option("--fabric", r.fabric,
                  "NVLink fabric membership of one node (nvidia-smi --query-gpu=fabric.clusterUuid,fabric.cliqueId "
                  "--format=csv,noheader, or nvidia-smi -q): a FILE named after the node, or a DIR. Repeatable")
      ->type_name("FILE|DIR");
  cmd.add_option("--gpu-info", r.gpu_info,
                  "GPU names of one node (nvidia-smi --query-gpu=name,pci.bus_id --format=csv): a FILE named after "
                  "the node, or a DIR. Names the GPU model of that node's topo -m. Repeatable")
      ->type_name("FILE|DIR");
  cmd.add_option("--ibnetdiscover", r.ibnetdiscover, "`ibnetdiscover` output of the InfiniBand fabric")
      ->type_name("FILE");
  cmd.add_option("--hca", o.hca,
                  "ibnetdiscover: keep only HCAs whose device name fully matches REGEX (e.g. 'mlx5_[0-7]'), so "
                  "storage HCAs do not turn a storage leaf into a compute leaf")
      ->type_name("REGEX");
  cmd.add_option("--compute-nics", o.compute_nics,
                  "topo -m: NICs whose name fully matches REGEX carry GPU traffic; the others are marked "
                  "compute: false (default: all NICs)")
      ->type_name("REGEX");
  cmd.add_option("--slurm-topology", r.slurm_topology,
                  "Slurm topology.conf (tree or block), or `scontrol show topology` output")
      ->type_name("FILE");
  cmd.add_option("--slurm-nodes", o.slurm_nodes,
                  "`scontrol [-o] show node` or `sinfo --json` output: each node's GPU count and product (its gpu "
                  "gres, e.g. Gres=gpu:h100:8) and memory (RealMemory, as host_memory_gb); nodes without GPUs are "
                  "skipped. With --slurm-topology for the switches")
      ->type_name("FILE");
  cmd.add_option("--topograph-model", r.topograph_models, "NVIDIA Topograph cluster model YAML")->type_name("FILE");
  cmd.add_option("--k8s-nodes", r.k8s_nodes, "`kubectl get nodes -o json` output; topology from node labels")
      ->type_name("FILE");
  cmd.add_option("--resource-slices", r.resource_slices,
                  "`kubectl get resourceslices -o json` (or -o yaml) output: each node's GPUs from its DRA "
                  "ResourceSlices (count, productName, PCI order and pcieRoot)")
      ->type_name("FILE");
  cmd.add_option("--node-names", r.node_name_maps,
                  "YAML/JSON mapping {name in a source: node name}: renames nodes (an AWS instance id, an OCI "
                  "instance OCID) before the sources are merged, so they meet the same host's other inputs")
      ->type_name("FILE");
  cmd.add_option("--instance-ids", r.instance_ids,
                  "pdsh's 'NODE: INSTANCE-ID' lines of each host's instance-id query (e.g. pdsh -w HOSTS curl -s "
                  "http://169.254.169.254/latest/meta-data/instance-id): the instance is renamed to the node")
      ->type_name("FILE");
  cmd.add_option("--label-map", r.label_map,
                  "Extra Kubernetes label KEY=ROLE, ROLE one of tier-N, leaf, spine, core, domain, sub-domain, "
                  "gpu-count, gpu-product (e.g. example.com/rack=tier-0). Repeatable")
      ->type_name("KEY=ROLE");
  cmd.add_option("--aws-topology", r.aws_topology, "`aws ec2 describe-instance-topology` JSON output")
      ->type_name("FILE");
  cmd.add_option("--gcp-instances", r.gcp_instances,
                  "`gcloud compute instances list --format=json` output (or the Compute API's instances.list / "
                  "aggregatedList): switches from each VM's physicalHostTopology (sub-block, block, cluster), GPUs "
                  "from guestAccelerators or the machine type, A4X sub-blocks as NVLink domains")
      ->type_name("FILE");
  cmd.add_option("--oci-compute-hosts", r.oci_compute_hosts,
                  "`oci compute compute-host list --all` output: local block, network block and HPC island as "
                  "switch tiers, the GPU memory fabric as NVLink domain, GPUs from the shape; nodes named by "
                  "instance OCID")
      ->type_name("FILE");
  cmd.add_option("--oci-rdma-topology", r.oci_rdma_topology,
                  "OCI instance metadata /opc/v2/host/rdmaTopologyData of one host: a FILE named after the host, "
                  "a DIR of such files, or pdsh's 'HOST: JSON' lines for many hosts. Repeatable")
      ->type_name("FILE|DIR");
}
}  // namespace

void register_discover(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<DiscoverOptions>();
  DiscoverRequest& r = opts->request;
  CLI::App* cmd = app.add_subcommand(
      "discover",
      "Build a cluster spec from what the hardware and tools already report (nvidia-smi, ibnetdiscover, Slurm, "
      "Kubernetes, AWS, Google Cloud, OCI)");
  add_input_options(*cmd, *opts);
  cmd->add_option("--gpu-model", r.topo.gpu_model,
                  "GPU product, since topo -m does not name it: sets memory, PCIe generation and NVLink speed; also "
                  "the GPU of nodes without topo -m or hints. Default: from --gpu-info, else inferred from the NVLinks "
                  "per GPU in topo -m (18: H100, 12: A100, 6: V100) with a warning, else H100 with a warning")
      ->type_name("NAME");
  cmd->add_option("--nvlink-GBps", r.topo.nvlink_GBps_per_link,
                  "NVLink bandwidth per link and direction in GB/s (default: from --gpu-model, e.g. 25 for H100)")
      ->check(kPositiveNumber);
  cmd->add_option("--nic-gbit", r.topo.nic_gbit,
                  "Line rate of compute NICs in Gbit/s (topo -m does not show it; default: the HCAs' link rate in "
                  "--ibnetdiscover, e.g. 4xNDR = 400, else 400)")
      ->check(kPositiveNumber);
  cmd->add_option("--gpus-per-node", r.merge.default_gpu_count,
                  "GPUs of nodes no topo -m or label describes (default 8; 4 for GB200/GB300)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--name", r.merge.cluster_name, "Cluster name in the spec (default 'discovered')");
  cmd->add_flag("--strict", r.merge.strict, "Treat every warning (conflicts, nodes without topology data) as an error");
  cmd->add_option("-o,--output", opts->output, "Write the spec to FILE (atomically) instead of stdout")
      ->type_name("FILE");
  add_format_option(*cmd, opts->format);
  cmd->footer(
      "Output: a native cluster spec, YAML (--format text) or JSON (--format json); see docs/cluster-spec.md.\n"
      "GPUs and NICs come from topo -m; accelerator domains (ClusterUUID.CliqueId) from --fabric, labels,\n"
      "an AWS GB200 capacity block, a Google A4X sub-block or an OCI GPU memory fabric; switch tiers from\n"
      "ibnetdiscover, topology.conf, the Topograph model, labels, AWS network nodes, Google's VM topology\n"
      "or OCI's blocks; GPU counts, products and PCIe roots of nodes without topo -m from labels,\n"
      "ResourceSlices, Slurm's node list or the cloud machine type or shape; host memory from Kubernetes'\n"
      "memory capacity or Slurm's RealMemory.\n"
      "Nodes the switch tree misses go under a switch named 'no-topology' and are reported. Warnings go to\n"
      "stderr. Inputs are documented in docs/formats.md.\n\n"
      "Example:\n"
      "  toposched discover --topo-m examples/topo/ --fabric examples/fabric/ \\\n"
      "      --ibnetdiscover examples/fabric.ibnet --hca 'mlx5_[01]' --gpu-model H100 -o cluster.yaml\n"
      "(the sample inputs of examples/; a FILE option takes several files and may be repeated)");
  cmd->callback([opts, cmd, &exit_code] {
    opts->request.merge.nic_gbit_from_fabric = cmd->count("--nic-gbit") == 0;
    exit_code = run_discover(*opts);
  });
}

}  // namespace toposched::cli
