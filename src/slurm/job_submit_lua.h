// The job_submit.lua that puts `toposched serve` into Slurm's submission path
// (job_submit/lua, shipped by Debian in slurm-wlm-basic-plugins).
//
// For every job whose --comment carries "toposched:KEY=VALUE,..." (keys tp, pp, dp, ep,
// policy; also gpus and nodes to override the size Slurm was given), the script posts the
// request to URL/v1/jobs through curl with a short timeout, sets the job's req_nodes (and
// node count) from the answer, and records the service's job id in the job's admin_comment
// ("toposched-job=ID") so that `serve --slurm` can release it when the job ends. Any failure
// (service down or slow, a refusal, an answer it cannot read) lets the job pass unchanged
// and logs why with slurm.log_info: the plugin never blocks a submission. Other comments
// are left alone. Pure function; thread-safe.
#pragma once

#include <string>

#include "topology/error.h"

namespace toposched::slurm {

struct JobSubmitLuaOptions {
  std::string url;              // the service's base URL, e.g. http://127.0.0.1:7070
  double timeout_s = 2;         // curl --max-time
  std::string curl = "curl";    // the curl binary (a path, or found on slurmctld's PATH)
  std::string token_file;       // optional: file holding the service's bearer token
  std::string default_policy;   // optional: policy when the comment names none
};

// kInvalidArgument for a URL that is not http(s)://HOST[:PORT][/PREFIX] or values that
// cannot be written into the script safely.
Result<std::string> job_submit_lua(const JobSubmitLuaOptions& options);

}  // namespace toposched::slurm
