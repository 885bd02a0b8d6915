// `toposched cost`: predicted time of one collective on a GPU selection, an nccl-tests-like
// sweep over message sizes, or a job's per-step communication on a placement. The model is
// in src/cost/ (docs/cost-model.md); this file only parses options and prints.
#include <cmath>

#include <fmt/format.h>

#include "cli/common.h"
#include "cost/collective.h"
#include "cost/job_comm.h"
#include "cost/compute.h"
#include "cost/job_file.h"
#include "cost/selection.h"

namespace toposched::cli {

namespace {

struct CostOptionsCli {
  std::string cluster;
  std::string gpus;
  std::string collective = "allreduce";
  std::string bytes;
  std::string algorithm = "auto";
  std::string sweep;
  double step_factor = 2;
  std::string job;
  std::string placement;
  double network_share = 1.0;
  OutputFormat format = OutputFormat::kText;
};

int run_job(const CostOptionsCli& o, const Cluster& c) {
  auto job = read_job_file(o.job);
  if (!job) {
    report(job.error());
    return kExitError;
  }
  auto gpus = read_placement_file(c, o.placement);
  if (!gpus) {
    report(gpus.error());
    return kExitError;
  }
  // Without the job file's compute_ms_per_step, the compute model on the first GPU's product.
  if (!gpus->empty()) {
    const GpuDatasheet& gpu = gpu_datasheet_of(c.node_type(c.gpu_node(gpus->front())));
    job->model = with_default_micro_batch(job->model, job->plan, gpu);  // the job gave its batch, not the split
    if (job->model.compute_us_per_step <= 0) job->model.compute_us_per_step = step_compute(job->model, job->plan, gpu).total_us;
  }
  auto est = estimate_job_comm(c, *gpus, job->plan, job->model, CostOptions{o.network_share});
  if (!est) {
    report(est.error());
    return kExitError;
  }
  if (o.format == OutputFormat::kJson) {
    Json j;
    j["job"] = job->name;
    j["gpus"] = gpus->size();
    j["plan"] = {{"tp", job->plan.tp}, {"pp", job->plan.pp}, {"dp", job->plan.dp},
                 {"ep", job->plan.ep}, {"cp", job->plan.cp}, {"order", job->plan.order}};
    j["step_comm_us"] = est->step_comm_us;
    j["ideal_step_comm_us"] = est->ideal_step_comm_us;
    j["slowdown"] = est->slowdown;
    j["exposed_comm_us"] = est->exposed_comm_us;
    j["ideal_exposed_comm_us"] = est->ideal_exposed_comm_us;
    j["step_slowdown"] = est->step_slowdown;
    j["compute_us"] = est->compute_us;
    j["bubble_us"] = est->bubble_us;
    j["straggler_us"] = est->straggler_us;
    j["step_us"] = est->step_us;
    j["ideal_step_us"] = est->ideal_step_us;
    Json groups = Json::array();
    for (const GroupComm& g : est->groups)
      groups.push_back({{"kind", g.kind},
                        {"collective", g.collective},
                        {"groups", g.groups},
                        {"group_size", g.group_size},
                        {"bytes", g.bytes},
                        {"calls", g.calls},
                        {"time_us", g.time_us},
                        {"ideal_time_us", g.ideal_time_us},
                        {"exposed_us", g.exposed_us}});
    j["groups"] = groups;
    return print_json(j);
  }
  fmt::print("job {} on {} GPUs (tp={} pp={} dp={} ep={} cp={}, order {})\n", job->name, gpus->size(), job->plan.tp,
             job->plan.pp, job->plan.dp, job->plan.ep, job->plan.cp, job->plan.order);
  fmt::print("{:>5} {:>14} {:>7} {:>6} {:>10} {:>6} {:>14} {:>14} {:>14}\n", "group", "collective", "groups", "size",
             "bytes", "calls", "time(us)", "ideal(us)", "exposed(us)");
  for (const GroupComm& g : est->groups)
    fmt::print("{:>5} {:>14} {:>7} {:>6} {:>10} {:>6} {:>14.1f} {:>14.1f} {:>14.1f}\n", g.kind, g.collective, g.groups,
               g.group_size, format_size(g.bytes), g.calls, g.time_us, g.ideal_time_us, g.exposed_us);
  fmt::print(
      "step communication {:.1f} us, ideal {:.1f} us, slowdown {:.3f}x; exposed {:.1f} us, step slowdown {:.3f}x\n",
      est->step_comm_us, est->ideal_step_comm_us, est->slowdown, est->exposed_comm_us, est->step_slowdown);
  if (est->compute_us > 0)
    fmt::print("step {:.1f} ms = compute {:.1f} + pipeline bubble {:.1f} + straggler {:.1f} + exposed communication {:.1f}\n",
               est->step_us / 1e3, est->compute_us / 1e3, est->bubble_us / 1e3, est->straggler_us / 1e3,
               est->exposed_comm_us / 1e3);
  return kExitOk;
}

// long: the collective mode's flags checked and printed in one place; the job mode is run_job
int run_cost(const CostOptionsCli& o) {
  const bool job_mode = !o.job.empty() || !o.placement.empty();
  if (job_mode) {
    if (o.job.empty() || o.placement.empty()) return usage_error("--job and --placement go together");
    if (!o.gpus.empty() || !o.bytes.empty() || !o.sweep.empty())
      return usage_error("--job/--placement cannot be combined with --gpus, --bytes or --sweep");
  } else {
    if (o.gpus.empty()) return usage_error("cost needs --gpus SEL (or --job FILE --placement FILE)");
    if (o.bytes.empty() == o.sweep.empty()) return usage_error("give exactly one of --bytes SIZE and --sweep MIN:MAX");
  }
  if (!(o.network_share > 0 && o.network_share <= 1)) return usage_error("--network-share must be in (0, 1]");
  if (!(o.step_factor > 1 && o.step_factor <= 1024)) return usage_error("--step-factor must be in (1, 1024]");
  auto coll = parse_collective(o.collective);
  if (!coll) return report(collectives().unknown(o.collective));
  auto algo = parse_algorithm(o.algorithm);
  if (!algo) return report(algorithms().unknown(o.algorithm));
  double lo = 0, hi = 0;
  if (!o.bytes.empty()) {
    auto b = parse_size(o.bytes);
    if (!b) return report(b.error());
    lo = hi = *b;
  } else if (!o.sweep.empty()) {
    auto colon = o.sweep.find(':');
    if (colon == std::string::npos)
      return usage_error(fmt::format("--sweep expects MIN:MAX (e.g. 8:8G), found '{}'", o.sweep));
    auto a = parse_size(o.sweep.substr(0, colon));
    if (!a) return report(a.error());
    auto b = parse_size(o.sweep.substr(colon + 1));
    if (!b) return report(b.error());
    if (*b < *a) return usage_error(fmt::format("--sweep {}: the maximum is below the minimum", o.sweep));
    if (*a < 1) return usage_error("--sweep needs a minimum of at least 1 byte");
    lo = *a;
    hi = *b;
  }

  int code = kExitOk;
  auto c = load_cluster_or_report(o.cluster, code);
  if (!c) return code;
  if (job_mode) return run_job(o, *c);

  auto gpus = parse_gpu_selection(*c, o.gpus);
  if (!gpus) return report(gpus.error());
  const CostOptions options{o.network_share};

  if (o.sweep.empty()) {
    auto e = estimate_collective(*c, *gpus, *coll, lo, *algo, options);
    if (!e) {
      report(e.error());
      return kExitError;
    }
    if (o.format == OutputFormat::kJson) {
      if (int rc = print_json(estimate_to_json(*e, lo)); rc != kExitOk) return rc;
    } else {
      fmt::print("{} of {} on {} GPUs ({} NVLink islands): {}/{}, {:.2f} us, algbw {:.2f} GB/s, busbw {:.2f} GB/s\n",
                 collective_name(*coll), format_size(lo), e->ranks, e->islands, algorithm_name(e->algorithm),
                 protocol_name(e->protocol), e->time_us, e->algbw_GBps, e->busbw_GBps);
    }
    return kExitOk;
  }

  Json rows = Json::array();
  if (o.format == OutputFormat::kText) {
    fmt::print("# {} on {} GPUs, algorithm {}\n", collective_name(*coll), gpus->size(), o.algorithm);
    fmt::print("#{:>13} {:>13} {:>9} {:>12} {:>12} {:>12}\n", "size(B)", "algorithm", "protocol", "time(us)",
               "algbw(GB/s)", "busbw(GB/s)");
  }
  for (double size = lo; size <= hi; size = std::floor(size * o.step_factor)) {
    auto e = estimate_collective(*c, *gpus, *coll, size, *algo, options);
    if (!e) {
      report(e.error());
      return kExitError;
    }
    if (o.format == OutputFormat::kJson) {
      rows.push_back(estimate_to_json(*e, size));
    } else {
      fmt::print(" {:>13.0f} {:>13} {:>9} {:>12.2f} {:>12.2f} {:>12.2f}\n", size, algorithm_name(e->algorithm),
                 protocol_name(e->protocol), e->time_us, e->algbw_GBps, e->busbw_GBps);
    }
    if (size * o.step_factor == size) break;
  }
  if (o.format == OutputFormat::kJson)
    return print_json(Json{{"collective", collective_name(*coll)}, {"ranks", gpus->size()}, {"rows", rows}});
  return kExitOk;
}

}  // namespace

void register_cost(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CostOptionsCli>();
  CLI::App* cmd = app.add_subcommand(
      "cost", "Predict what NCCL achieves: one collective on chosen GPUs, a size sweep, or a job's step communication");
  cmd->add_option("--cluster,-c", o->cluster, "Cluster SPEC: a spec file or preset:NAME[?k=v&...]")->required();
  cmd->add_option("--gpus,-g", o->gpus,
                  "GPUs, in rank order: NODE:INDEX, NODE:FIRST-LAST, or a hostlist of whole nodes, comma-separated\n"
                  "(e.g. 'dgx-h100-001:0-7,dgx-h100-002:0-7' or 'dgx-h100-[001-004]')");
  cmd->add_option("--collective", o->collective,
                  "allreduce (default), allgather, reduce-scatter, broadcast, reduce, all-to-all, send-recv");
  cmd->add_option("--bytes,-b", o->bytes, "Message size as nccl-tests counts it; K/M/G/T are powers of 1024 (e.g. 8G)");
  cmd->add_option("--algorithm,-a", o->algorithm,
                  "auto (default: the fastest, as NCCL's tuner picks), ring, tree, nvls, hierarchical, direct");
  cmd->add_option("--sweep", o->sweep,
                  "MIN:MAX sizes, multiplied by --step-factor each row (e.g. 8:8G), like nccl-tests -b -e");
  cmd->add_option("--step-factor", o->step_factor, "Size multiplier between sweep rows (default 2)");
  cmd->add_option("--job", o->job,
                  "Job file (YAML/JSON): plan tp/pp/dp/ep/cp, workload class or model (docs/cost-model.md)");
  cmd->add_option("--placement", o->placement, "Placement file: the GPU of each rank (docs/cost-model.md)");
  cmd->add_option("--network-share", o->network_share,
                  "Fraction (0,1] of its network bandwidth the job gets when others share its uplinks (default 1)");
  add_format_option(*cmd, o->format);
  cmd->footer(
      "Examples:\n"
      "  toposched cost -c 'preset:dgx-h100?nodes=4' --gpus 'dgx-h100-[001-004]' --collective allreduce --bytes 8G\n"
      "  toposched cost -c preset:dgx-a100 --gpus dgx-a100-001:0-7 --sweep 8:8G\n"
      "  toposched cost -c preset:dgx-h100 --job tests/data/cost_job.yaml \\\n"
      "      --placement tests/data/cost_placement.yaml --format json\n"
      "JSON: "
      "{\"algorithm\",\"time_us\",\"algbw_GBps\",\"busbw_GBps\",\"protocol\",\"collective\",\"bytes\",\"ranks\","
      "\"islands\"};\n"
      "with --sweep {\"collective\",\"ranks\",\"rows\":[...]}; with --job "
      "{\"job\",\"step_comm_us\",\"ideal_step_comm_us\",\n"
      "\"slowdown\",\"groups\":[...],...}. algbw = bytes/time; busbw as nccl-tests defines it. The model and its\n"
      "sources: docs/cost-model.md.");
  cmd->callback([o, &exit_code] { exit_code = run_cost(*o); });
}

}  // namespace toposched::cli
