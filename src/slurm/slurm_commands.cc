#include "slurm/slurm_commands.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <algorithm>

#include <fmt/format.h>

#include "topology/file_io.h"
#include "topology/hostlist.h"

extern char** environ;

namespace toposched::slurm {

namespace {

std::string command_name(const std::vector<std::string>& argv) { return fmt::format("{}", fmt::join(argv, " ")); }

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
};

// Reads both pipes until they close or the deadline passes; false on timeout.
bool drain(int out_fd, int err_fd, CommandOutput& result, std::chrono::steady_clock::time_point deadline) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buf[65536];
  while (open_count > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    int ready = poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return ready == 0 ? false : true;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  return true;
}

std::vector<std::string> environment_with(const EnvVars& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    bool replaced = false;
    for (const auto& [k, v] : extra)
      if (kv.substr(0, k.size() + 1) == k + "=") replaced = true;
    if (!replaced) env.emplace_back(kv);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

bool lacks_json_option(const CommandOutput& r) {
  return r.exit_code != 0 && (r.err.find("unrecognized option") != std::string::npos ||
                              r.err.find("invalid option") != std::string::npos);
}

tl::unexpected<Error> failed(const std::vector<std::string>& argv, const CommandOutput& r) {
  std::string err = r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  return make_error(ErrorCode::kUnavailable,
                    fmt::format("'{}' exited with status {}{}", command_name(argv), r.exit_code, err.empty() ? "" : ": " + err));
}

// Runs a Slurm client whose output must be complete: non-zero exit is an error.
Result<std::string> slurm_output(const std::vector<std::string>& argv, int timeout_s) {
  TOPOSCHED_TRY(r, run_command(argv, {}, timeout_s));
  if (r.exit_code != 0) return failed(argv, r);
  return std::move(r.out);
}

}  // namespace

Result<CommandOutput> run_command(const std::vector<std::string>& argv, const EnvVars& extra_env, int timeout_s) {
  if (argv.empty()) return make_error(ErrorCode::kInvalidArgument, "run_command: empty command");
  Pipe out, err;
  if (pipe2(out.fd, O_CLOEXEC) != 0 || pipe2(err.fd, O_CLOEXEC) != 0)
    return make_error(ErrorCode::kUnavailable, fmt::format("cannot create a pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_storage = environment_with(extra_env);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return make_error(ErrorCode::kUnavailable, fmt::format("cannot run '{}': {} (is Slurm's client installed and on PATH?)",
                                                           argv[0], std::strerror(rc)));
  close(out.fd[1]);
  out.fd[1] = -1;
  close(err.fd[1]);
  err.fd[1] = -1;
  CommandOutput result;
  bool finished = drain(out.fd[0], err.fd[0], result, std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s));
  if (!finished) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished)
    return make_error(ErrorCode::kUnavailable,
                      fmt::format("'{}' did not finish within {} s and was stopped", command_name(argv), timeout_s));
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Result<SlurmLiveState> read_live_state(int timeout_s) {
  SlurmLiveState live;
  const std::vector<std::string> sinfo = {"sinfo", "--json"};
  TOPOSCHED_TRY(nodes_run, run_command(sinfo, {}, timeout_s));
  if (lacks_json_option(nodes_run)) {
    TOPOSCHED_TRY(text, slurm_output({"scontrol", "-o", "show", "node"}, timeout_s));
    TOPOSCHED_TRY(nodes, parse_scontrol_nodes(text));
    live.nodes = std::move(nodes);
  } else {
    if (nodes_run.exit_code != 0) return failed(sinfo, nodes_run);
    TOPOSCHED_TRY(nodes, parse_sinfo_json(nodes_run.out));
    live.nodes = std::move(nodes);
  }
  const std::vector<std::string> squeue = {"squeue", "--json"};
  TOPOSCHED_TRY(jobs_run, run_command(squeue, {}, timeout_s));
  if (lacks_json_option(jobs_run)) {
    TOPOSCHED_TRY(text, slurm_output({"scontrol", "-o", "-d", "show", "job"}, timeout_s));
    TOPOSCHED_TRY(jobs, parse_scontrol_jobs(text));
    live.jobs = std::move(jobs);
  } else {
    if (jobs_run.exit_code != 0) return failed(squeue, jobs_run);
    TOPOSCHED_TRY(jobs, parse_squeue_json(jobs_run.out));
    live.jobs = std::move(jobs);
  }
  return live;
}

Result<std::string> submit_batch(const SubmitPlan& plan, const std::string& hostfile_path, int timeout_s) {
  TOPOSCHED_CHECK(write_file_atomically(hostfile_path, plan.hostfile));
  std::vector<std::string> argv = {"sbatch"};
  argv.insert(argv.end(), plan.sbatch_args.begin(), plan.sbatch_args.end());
  auto r = run_command(argv, {{"SLURM_HOSTFILE", hostfile_path}}, timeout_s);
  if (!r || r->exit_code != 0) {
    std::remove(hostfile_path.c_str());
    if (!r) return tl::unexpected(r.error());
    return failed(argv, *r);
  }
  // --parsable prints "jobid" or "jobid;cluster".
  std::string id = r->out.substr(0, r->out.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    return make_error(ErrorCode::kParse, fmt::format("sbatch --parsable printed '{}', expected a job id", r->out));
  return id;
}

}  // namespace toposched::slurm

namespace toposched::slurm {

Result<std::vector<std::string>> mapping_report(const LiveMapping& mapping, const SlurmLiveState& live,
                                                bool ignore_unknown_nodes) {
  std::vector<std::string> warnings;
  std::vector<std::string> unknown_gpu_nodes, unknown_cpu_nodes;
  for (const auto& name : mapping.slurm_only_nodes) {
    auto it = std::find_if(live.nodes.begin(), live.nodes.end(), [&](const SlurmNode& n) { return n.name == name; });
    (it != live.nodes.end() && it->gpus > 0 ? unknown_gpu_nodes : unknown_cpu_nodes).push_back(name);
  }
  if (!unknown_gpu_nodes.empty() && !ignore_unknown_nodes)
    return make_error(ErrorCode::kValidation,
                      fmt::format("Slurm has GPU nodes that the cluster spec does not describe: {}; add them to the "
                                  "spec (or pass --ignore-unknown-nodes to place on the known nodes only)",
                                  compress_hostlist(unknown_gpu_nodes)));
  if (!unknown_gpu_nodes.empty())
    warnings.push_back(fmt::format("Slurm GPU nodes not in the cluster spec (never planned on): {}",
                                   compress_hostlist(unknown_gpu_nodes)));
  if (!unknown_cpu_nodes.empty())
    warnings.push_back(fmt::format("Slurm nodes without GPUs, not in the cluster spec: {}", compress_hostlist(unknown_cpu_nodes)));
  if (!mapping.spec_only_nodes.empty())
    warnings.push_back(fmt::format("cluster spec nodes that Slurm does not know (not planned on): {}",
                                   compress_hostlist(mapping.spec_only_nodes)));
  if (!mapping.unusable_nodes.empty())
    warnings.push_back(fmt::format("nodes Slurm cannot use now (down, drained or outside the partition): {}",
                                   compress_hostlist(mapping.unusable_nodes)));
  for (const auto& m : mapping.gpu_count_mismatches) warnings.push_back("GPU count differs: " + m);
  return warnings;
}

Result<SubmitOutcome> submit_with_plan(const Cluster& cluster, const std::vector<std::string>& sbatch_args,
                                       const PlaceRequest& shape, const SubmitOptions& options_in) {
  SubmitOptions options = options_in;
  // The job's srun reads SLURM_HOSTFILE from its own working directory: make the path absolute.
  std::error_code ec;
  auto absolute = std::filesystem::absolute(options.hostfile_path, ec);
  if (ec || options.hostfile_path.empty())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--hostfile '{}': not a usable path", options.hostfile_path));
  options.hostfile_path = absolute.lexically_normal().string();
  TOPOSCHED_TRY(args, parse_sbatch_args(sbatch_args));
  TOPOSCHED_TRY(live, read_live_state(options.timeout_s));
  TOPOSCHED_TRY(mapping, apply_live_state(cluster, live, {args.size.partition}));
  TOPOSCHED_TRY(warnings, mapping_report(mapping, live, options.ignore_unknown_nodes));
  // An engine holding what Slurm holds (no store: the plan is a dry run); the GPUs Slurm has
  // not configured are the request's blocked GPUs.
  Engine engine(cluster, AllocationState(cluster));
  TOPOSCHED_CHECK(hold_live_mapping(engine, mapping));
  PlaceRequest planned = shape;
  planned.blocked_gpus.insert(planned.blocked_gpus.end(), mapping.unconfigured_gpus.begin(),
                              mapping.unconfigured_gpus.end());
  TOPOSCHED_TRY(plan, plan_submit(engine, args, planned));
  SubmitOutcome outcome{std::move(plan), {}, std::move(warnings), options.hostfile_path};
  if (options.dry_run) return outcome;
  TOPOSCHED_TRY(id, submit_batch(outcome.plan, options.hostfile_path, options.timeout_s));
  outcome.job_id = std::move(id);
  return outcome;
}

}  // namespace toposched::slurm
