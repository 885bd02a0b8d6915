#include "sim/scale.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/html_page.h"
#include "formats/json_output.h"
#include "cost/compute.h"
#include "placement/engine.h"
#include "placement/placement.h"
#include "sim/backend.h"
#include "topology/file_io.h"

namespace toposched::sim {

namespace {

using Json = nlohmann::ordered_json;

int model_parallel(const ParallelPlan& p) { return p.tp * p.pp * p.cp * p.ep; }

// Slurm's topology/block takes a bare GPU count (--gpus=K) from one base block, so a front
// end submits a job larger than one node as whole nodes with their GPUs (-N n
// --gpus-per-node g); docs/placement.md, slurm-block.
void slurm_block_submission(const Cluster& c, std::string_view policy, JobRequest& r) {
  if (policy != "slurm-block" || r.gpus_per_node > 0 || r.nodes > 0) return;
  int gpn = 0;
  for (std::size_t i = 0; i < c.node_count(); ++i) gpn = std::max(gpn, c.node_gpu_count(NodeId(static_cast<std::uint32_t>(i))));
  if (gpn > 0 && r.gpus > gpn && r.gpus % gpn == 0) r.gpus_per_node = gpn;
}

JobRequest request_for(const JobSpec& spec) {
  JobRequest r;
  // No job id: place_job picks a free one, so a --state holding any name does not conflict.
  r.gpus = spec.plan.gpus();
  r.tp = spec.plan.tp;
  r.pp = spec.plan.pp;
  r.cp = spec.plan.cp;
  r.ep = spec.plan.ep;
  r.dp = 0;  // what is left: gpus / (tp x pp x cp x ep)
  if (workload_class(spec.model.name)) r.model_class = spec.model.name;
  if (!spec.model.training) {
    r.workload = WorkloadKind::kInference;
    r.replica_gpus = spec.plan.tp * spec.plan.pp;
  }
  return r;
}

// The farthest level joining the GPUs of any group of `kind` (from each group's first rank to
// the others: in a tree that is the level of the group's common ancestor).
std::string farthest_level(const Cluster& c, std::span<const GpuId> gpus, const ParallelPlan& plan, std::string_view kind) {
  Path worst;
  int worst_distance = -1;
  for (int rank = 0; rank < static_cast<int>(gpus.size()); ++rank) {
    auto members = group_of_rank(plan, kind, rank);
    if (!members || members->empty() || members->front() != rank) continue;  // each group once, from its first rank
    for (int m : *members) {
      Path p = c.path(gpus[static_cast<std::size_t>(rank)], gpus[static_cast<std::size_t>(m)]);
      if (p.distance() > worst_distance) {
        worst_distance = p.distance();
        worst = p;
      }
    }
  }
  return worst_distance < 0 ? std::string("gpu") : c.level_name(worst);
}

// The farthest level joining any of the job's GPUs.
std::string job_widest_level(const Cluster& c, std::span<const GpuId> gpus) {
  Path worst;
  int worst_distance = -1;
  for (GpuId g : gpus) {
    Path p = c.path(gpus.front(), g);
    if (p.distance() > worst_distance) {
      worst_distance = p.distance();
      worst = p;
    }
  }
  return c.level_name(worst);
}

// Where efficiency breaks, in words: for the parallel group whose per-step time grows most
// over the curve, each size at which its groups reach a farther level (with the efficiency
// lost across that step), then the step that loses the most efficiency overall.
std::string describe_break(const ScaleCurve& curve) {
  std::vector<const ScalePoint*> placed;
  for (const ScalePoint& p : curve.points)
    if (p.placed) placed.push_back(&p);
  if (placed.empty()) return "no size could be placed";
  const ScalePoint& last = *placed.back();
  const ScalePoint* worst_from = nullptr;
  const ScalePoint* worst_to = nullptr;
  double worst_drop = 0.005;  // smaller losses are rounding, not a break
  for (std::size_t i = 1; i < placed.size(); ++i)
    if (placed[i - 1]->efficiency - placed[i]->efficiency > worst_drop) {
      worst_drop = placed[i - 1]->efficiency - placed[i]->efficiency;
      worst_from = placed[i - 1];
      worst_to = placed[i];
    }
  if (!worst_to) return fmt::format("efficiency holds (>= {:.3f}) up to {} GPUs", last.efficiency, last.gpus);
  auto group_of = [](const ScalePoint& p, const std::string& kind) -> std::optional<std::size_t> {
    for (std::size_t k = 0; k < p.groups.size(); ++k)
      if (p.groups[k].kind == kind) return k;
    return std::nullopt;
  };
  // The kind whose time grew most from the first placed size to the last.
  std::string kind, collective;
  double growth = -1;
  for (const GroupComm& g : last.groups) {
    auto first = group_of(*placed.front(), g.kind);
    double grew = g.time_us - (first ? placed.front()->groups[*first].time_us : 0.0);
    if (grew > growth) {
      growth = grew;
      kind = g.kind;
      collective = g.collective;
    }
  }
  std::string out;
  std::string level;
  for (std::size_t i = 0; i < placed.size(); ++i) {
    auto k = group_of(*placed[i], kind);
    if (!k) continue;
    const std::string& now = placed[i]->group_levels[*k];
    if (now == level) continue;
    out += out.empty() ? fmt::format("{} {} ", kind, collective) : ", ";
    out += level.empty() ? fmt::format("spans {} from {} GPUs", now, placed[i]->gpus)
                         : fmt::format("leaves {} at {} GPUs", level, placed[i]->gpus);
    if (i > 0) out += fmt::format(" (efficiency {:.3f} -> {:.3f})", placed[i - 1]->efficiency, placed[i]->efficiency);
    level = now;
  }
  if (!out.empty()) out += "; ";
  return out + fmt::format("largest loss {:.3f} -> {:.3f} at {} GPUs", worst_from->efficiency, worst_to->efficiency, worst_to->gpus);
}

std::string randomized_note(std::uint64_t seed) {
  return fmt::format(
      "one random draw per size (seed {}), not a scaling curve: each size is an independent draw, so efficiency above 1 at a "
      "size means the smaller size landed scattered",
      seed);
}

Result<void> check_sizes(const JobSpec& spec, const std::vector<int>& sizes) {
  const int unit = model_parallel(spec.plan);
  if (sizes.empty()) return make_error(ErrorCode::kInvalidArgument, "give at least one GPU count");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < unit || sizes[i] % unit != 0)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("GPU count {} is not a multiple of the job's model-parallel size tp x pp x cp x ep = {}", sizes[i], unit));
    if (i > 0 && sizes[i] <= sizes[i - 1])
      return make_error(ErrorCode::kInvalidArgument, fmt::format("GPU counts must be ascending; {} follows {}", sizes[i], sizes[i - 1]));
  }
  return {};
}

}  // namespace

namespace {

// The step of `spec` on given GPUs (rank order): compute with the pipeline bubble, plus the
// cost model's exposed communication.
Result<ScalePoint> step_on(const Cluster& cluster, std::span<const GpuId> gpus, const JobSpec& spec, int virtual_stages) {
  ScalePoint pt;
  pt.gpus = spec.plan.gpus();
  pt.dp = spec.plan.dp;
  WorkloadModel model = spec.model;
  if (virtual_stages > 0) model.virtual_stages = virtual_stages;  // --virtual-stages overrides the job file
  const GpuDatasheet& gpu = gpu_datasheet_of(cluster.node_type(cluster.gpu_node(gpus.front())));
  model = with_default_micro_batch(model, spec.plan, gpu);  // the job gave its batch, not the split
  pt.micro_batch = model.micro_batch;
  pt.micro_batches = model.micro_batches;
  if (model.compute_us_per_step <= 0) model.compute_us_per_step = step_compute(model, spec.plan, gpu).total_us;
  TOPOSCHED_TRY(est, estimate_job_comm(cluster, gpus, spec.plan, model));
  pt.placed = true;
  pt.compute_s = (est.compute_us + est.bubble_us + est.straggler_us) / 1e6;
  pt.bubble_s = est.bubble_us / 1e6;
  pt.straggler_s = est.straggler_us / 1e6;
  pt.exposed_comm_s = est.exposed_comm_us / 1e6;
  pt.step_time_s = est.step_us / 1e6;
  const double sequences = static_cast<double>(spec.plan.dp) * spec.plan.ep * model.micro_batch * std::max(model.micro_batches, 1);
  pt.samples_per_s = pt.step_time_s > 0 ? sequences / pt.step_time_s : 0;
  pt.widest_level = job_widest_level(cluster, gpus);
  pt.groups = est.groups;
  for (const GroupComm& g : pt.groups) pt.group_levels.push_back(farthest_level(cluster, gpus, spec.plan, g.kind));
  return pt;
}

// Sequences per second per GPU of `spec` on the cost model's ideal placement (empty cluster).
Result<double> ideal_per_gpu_throughput(const Cluster& cluster, const JobSpec& spec, int virtual_stages) {
  const int gpus = spec.plan.gpus();
  const bool pp_outermost = spec.plan.order.ends_with("pp");
  TOPOSCHED_TRY(ideal, ideal_placement(cluster, gpus, GpuId(0), pp_outermost ? gpus / spec.plan.pp : 0));
  TOPOSCHED_TRY(pt, step_on(cluster, ideal, spec, virtual_stages));
  return pt.samples_per_s / gpus;
}

}  // namespace

std::vector<std::string> scale_policies_all() {
  std::vector<std::string> out;
  for (const PlacementPolicy* p : placement_policies())
    if (!p->randomized()) out.emplace_back(p->name());
  return out;
}

Result<ScalePoint> predict_step(const Cluster& cluster, const AllocationState& start, const std::string& policy, const JobSpec& spec,
                                int virtual_stages, std::uint64_t seed) {
  TOPOSCHED_CHECK(validate_plan(spec.plan));
  if (virtual_stages < 0) return make_error(ErrorCode::kInvalidArgument, "virtual_stages must be >= 1 (0: the job file's)");
  AllocationState state = start;
  PlaceRequest req;
  req.job = request_for(spec);
  req.job.seed = seed;
  req.policy = policy;
  slurm_block_submission(cluster, policy, req.job);
  auto placed = place_job(state, req, false);
  if (!placed) {
    if (placed.error().code != ErrorCode::kInfeasible) return tl::unexpected(placed.error());
    ScalePoint pt;
    pt.gpus = spec.plan.gpus();
    pt.dp = spec.plan.dp;
    pt.why_not = placed.error().message;
    return pt;
  }
  return step_on(cluster, placed->gpus_by_rank, spec, virtual_stages);
}

Result<ScaleResult> scale_job(const Cluster& cluster, const AllocationState& start, const JobSpec& spec, const ScaleOptions& o) {
  TOPOSCHED_CHECK(validate_plan(spec.plan));
  TOPOSCHED_CHECK(check_sizes(spec, o.gpu_counts));
  if (o.policies.empty()) return make_error(ErrorCode::kInvalidArgument, "give at least one policy");
  std::vector<const PlacementPolicy*> chosen;
  for (const std::string& p : o.policies) {
    TOPOSCHED_TRY(policy, find_policy(p));
    chosen.push_back(policy);
  }
  ScaleResult out;
  out.job = spec.name;
  out.cluster = cluster.name();
  out.plan = spec.plan;
  out.model = spec.model;
  out.virtual_stages = o.virtual_stages > 0 ? o.virtual_stages : spec.model.virtual_stages;
  JobSpec smallest = spec;
  smallest.plan.dp = o.gpu_counts.front() / model_parallel(spec.plan);
  auto ideal = ideal_per_gpu_throughput(cluster, smallest, o.virtual_stages);
  out.ideal_samples_per_s_per_gpu = ideal ? *ideal : 0;  // 0: the cluster has no ideal placement of that size
  for (std::size_t k = 0; k < o.policies.size(); ++k) {
    const std::string& policy = o.policies[k];
    ScaleCurve curve;
    curve.policy = policy;
    if (chosen[k]->randomized()) curve.note = randomized_note(o.seed);
    const ScalePoint* first = nullptr;
    for (int gpus : o.gpu_counts) {
      JobSpec at = spec;
      at.plan.dp = gpus / model_parallel(spec.plan);
      TOPOSCHED_TRY(pt, predict_step(cluster, start, policy, at, o.virtual_stages, o.seed));
      curve.points.push_back(std::move(pt));
    }
    for (ScalePoint& pt : curve.points) {
      if (!pt.placed) continue;
      if (!first) first = &pt;
      pt.speedup = first->samples_per_s > 0 ? pt.samples_per_s / first->samples_per_s : 0;
      pt.efficiency = pt.speedup * first->gpus / pt.gpus;
      if (out.ideal_samples_per_s_per_gpu > 0) pt.efficiency_vs_ideal = pt.samples_per_s / pt.gpus / out.ideal_samples_per_s_per_gpu;
    }
    curve.breaks = describe_break(curve);
    out.curves.push_back(std::move(curve));
  }
  return out;
}

Result<std::string> scale_json(const ScaleResult& r) {
  Json root;
  root["job"] = r.job;
  root["cluster"] = r.cluster;
  root["plan"] = {{"tp", r.plan.tp}, {"pp", r.plan.pp}, {"cp", r.plan.cp}, {"ep", r.plan.ep}, {"order", r.plan.order}};
  root["virtual_stages"] = r.virtual_stages;
  Json policies = Json::object(), breaks = Json::object(), notes = Json::object();
  for (const ScaleCurve& c : r.curves) {
    Json points = Json::array();
    for (const ScalePoint& p : c.points) {
      Json j;
      j["gpus"] = p.gpus;
      j["dp"] = p.dp;
      j["placed"] = p.placed;
      if (!p.placed) {
        j["step_time_s"] = nullptr;
        j["speedup"] = nullptr;
        j["efficiency"] = nullptr;
        j["error"] = p.why_not;
      } else {
        j["step_time_s"] = round_decimals(p.step_time_s, 6);
        j["speedup"] = round_decimals(p.speedup, 6);
        j["efficiency"] = round_decimals(p.efficiency, 6);
        j["efficiency_vs_ideal"] = round_decimals(p.efficiency_vs_ideal, 6);
        j["throughput_samples_per_s"] = round_decimals(p.samples_per_s, 4);
        j["compute_s"] = round_decimals(p.compute_s, 6);
        j["bubble_s"] = round_decimals(p.bubble_s, 6);
        j["micro_batch"] = p.micro_batch;
        j["micro_batches"] = p.micro_batches;
        j["straggler_s"] = round_decimals(p.straggler_s, 6);
        j["exposed_comm_s"] = round_decimals(p.exposed_comm_s, 6);
        Json kinds = Json::object();  // exposed communication per kind, s
        for (const GroupComm& g : p.groups) kinds[g.kind] = round_decimals(g.exposed_us / 1e6, 6);
        j["exposed_comm_by_kind_s"] = kinds;
        j["widest_level"] = p.widest_level;
      }
      points.push_back(std::move(j));
    }
    policies[c.policy] = std::move(points);
    breaks[c.policy] = c.breaks;
    if (!c.note.empty()) notes[c.policy] = c.note;
  }
  root["policies"] = std::move(policies);
  root["breaks"] = std::move(breaks);
  if (!notes.empty()) root["notes"] = std::move(notes);
  TOPOSCHED_TRY(text, dump_json(root, 2));
  return text + "\n";
}

std::string scale_table(const ScaleResult& r) {
  std::string out = fmt::format("job {} on {}: tp={} pp={} cp={} ep={}, dp grows with the size (weak scaling), {} virtual stage(s)\n",
                                r.job, r.cluster, r.plan.tp, r.plan.pp, r.plan.cp, r.plan.ep, r.virtual_stages);
  for (const ScaleCurve& c : r.curves) {
    out += fmt::format("\n{}\n", c.policy);
    if (!c.note.empty()) out += fmt::format("note: {}\n", c.note);
    out += fmt::format("{:>7} {:>6} {:>12} {:>12} {:>10} {:>10} {:>9} {:>12}  {}\n", "gpus", "dp", "step (s)", "samples/s", "speed-up",
                       "efficiency", "vs ideal", "exposed (s)", "widest level");
    for (const ScalePoint& p : c.points) {
      if (!p.placed) {
        out += fmt::format("{:>7} {:>6}  cannot place: {}\n", p.gpus, p.dp, p.why_not);
        continue;
      }
      out += fmt::format("{:>7} {:>6} {:>12.4f} {:>12.2f} {:>10.2f} {:>10.3f} {:>9.3f} {:>12.4f}  {}\n", p.gpus, p.dp, p.step_time_s,
                         p.samples_per_s, p.speedup, p.efficiency, p.efficiency_vs_ideal, p.exposed_comm_s, p.widest_level);
    }
    out += fmt::format("where efficiency breaks: {}\n", c.breaks);
  }
  return out;
}

std::string scale_html(const ScaleResult& r) {
  Json points = Json::array();
  for (const ScaleCurve& c : r.curves)
    for (const ScalePoint& p : c.points)
      if (p.placed)
        points.push_back({{"policy", c.policy}, {"gpus", p.gpus}, {"efficiency", round_decimals(p.efficiency, 5)},
                          {"step_time_s", round_decimals(p.step_time_s, 6)}, {"speedup", round_decimals(p.speedup, 4)}});
  auto line = [&](std::string title, std::string y, std::string ytitle) {
    return Json{{"$schema", "https://vega.github.io/schema/vega-lite/v5.json"},
                {"title", title},
                {"width", 520},
                {"height", 260},
                {"data", {{"values", points}}},
                {"mark", {{"type", "line"}, {"point", true}}},
                {"encoding", {{"x", {{"field", "gpus"}, {"type", "quantitative"}, {"title", "GPUs (log scale)"}, {"scale", {{"type", "log"}, {"base", 2}}}}},
                              {"y", {{"field", y}, {"type", "quantitative"}, {"title", ytitle}, {"scale", {{"zero", false}}}}},
                              {"color", {{"field", "policy"}, {"type", "nominal"}}}}}};
  };
  html::ChartPage page;
  page.title = "toposched scaling report";
  page.intro_html = fmt::format(
      "<p>Job <b>{}</b> on <b>{}</b>: tp={} pp={} cp={} ep={}; data parallelism grows with the GPU count (weak scaling); {} virtual "
      "pipeline stage(s). Efficiency = speed-up x smallest size / size.</p>\n",
      html::escape(r.job), html::escape(r.cluster), r.plan.tp, r.plan.pp, r.plan.cp, r.plan.ep, r.virtual_stages);
  std::string table = "<table><thead><tr><th>policy</th><th>GPUs</th><th>step (s)</th><th>speed-up</th><th>efficiency</th><th>widest level</th></tr></thead><tbody>";
  for (const ScaleCurve& c : r.curves) {
    if (!c.note.empty()) table += fmt::format("<tr><td colspan=\"6\"><b>{}: {}</b></td></tr>", html::escape(c.policy), html::escape(c.note));
    for (const ScalePoint& p : c.points)
      table += p.placed ? fmt::format("<tr><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.2f}</td><td>{:.3f}</td><td>{}</td></tr>", html::escape(c.policy),
                                      p.gpus, p.step_time_s, p.speedup, p.efficiency, html::escape(p.widest_level))
                        : fmt::format("<tr><td>{}</td><td>{}</td><td colspan=\"4\">cannot place: {}</td></tr>", html::escape(c.policy), p.gpus,
                                      html::escape(p.why_not));
    table += fmt::format("<tr><td colspan=\"6\"><i>{}: {}</i></td></tr>", html::escape(c.policy), html::escape(c.breaks));
  }
  table += "</tbody></table>";
  page.summary_html = std::move(table);
  page.charts["chart-efficiency"] = line("Scaling efficiency per policy", "efficiency", "efficiency (1 = linear)");
  page.charts["chart-step-time"] = line("Predicted step time per policy", "step_time_s", "step time (s)");
  return html::render_chart_page(page);
}

Result<void> write_scale_report(const std::string& dir, const ScaleResult& result) {
  // Both are rendered before anything is created (write_report_dir writes report.json last).
  TOPOSCHED_TRY(json, scale_json(result));
  return write_report_dir(dir, json, scale_html(result));
}

}  // namespace toposched::sim
