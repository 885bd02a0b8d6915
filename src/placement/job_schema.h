// The job-request schema: ONE table, one row per field a job request can carry, from
// which every front end reads and writes requests:
//
//   - the JSON reader and writer (POST /v1/jobs bodies; the request a store keeps beside
//     a job): place_request_from_json / place_request_to_json in placement/engine.h;
//   - the command line: `toposched place` registers one flag per row that names one
//     (cli/job_flags.h), `toposched slurm submit` the rows it lists;
//   - Kubernetes: the rows with a `toposched.io/` annotation (k8s/pod_request.h);
//   - Slurm's submit wrapper (slurm/submit_plan.h) takes a PlaceRequest built from them.
//
// Each row says its key, its type, its bounds (inclusive; the same on every front end),
// where it lives in a PlaceRequest, its help text, its CLI flag and its annotation. A
// value outside the bounds is refused with a message naming the key (or the flag, or the
// annotation) and what was found, before any placement runs; normalize() (job_request.h)
// then checks what needs the cluster or several fields together.
//
// Adding a field to JobRequest = adding one row here; the tests iterate the table and
// send every row through the CLI and the JSON reader (tests/cli/job_schema_test.cc).
// Immutable static data; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "placement/job_request.h"
#include "placement/placement.h"
#include "topology/error.h"

namespace toposched {

// A place request as front ends send it: the job and the name of the policy.
struct PlaceRequest {
  JobRequest job;
  std::string policy = "topo";
  // Nodes the placement may use (empty: every node). The Kubernetes extender passes the
  // nodes kube-scheduler offered (placement/place_within.h); not part of the request JSON.
  NodeMask allowed;
  // GPUs the placement may not use although no job holds them (empty: none): the GPU-level
  // mask beside `allowed`, for GPUs the cluster spec has but the scheduler that runs the job
  // cannot hand out (Slurm's GPUs beyond a node's configured gres count). Not part of the
  // request JSON.
  std::vector<GpuId> blocked_gpus;
  // Choose the GPUs as Slurm's select/cons_tres will allocate them: on each node the policy
  // chose, its lowest free GPU indices, keeping the policy's rank pattern
  // (placement/slurm_alignment.h). `toposched slurm submit` sets it; not part of the request
  // JSON.
  bool slurm_aligned = false;
};

enum class JobFieldType {
  kInt,       // int, bounds [min, max]
  kUint64,    // std::uint64_t, bounds [min, max]
  kBool,      // bool (a CLI flag without a value)
  kString,    // std::string, checked by `check` when set
  kWorkload,  // WorkloadKind, written and read by its name
};

// Where a field lives in a PlaceRequest.
using JobFieldRef = std::variant<int*, std::uint64_t*, bool*, std::string*, WorkloadKind*>;

struct JobField {
  std::string_view key;  // JSON key (POST /v1/jobs, stored request)
  JobFieldType type;
  std::int64_t min = 0;  // kInt / kUint64: inclusive bounds
  std::int64_t max = 0;
  JobFieldRef (*ref)(PlaceRequest&);
  std::string_view help;        // the CLI help line
  std::string_view cli_flag;    // CLI11 names ("--gpus,-G"); empty: not a CLI flag
  std::string_view annotation = {};  // Kubernetes annotation ("toposched.io/tp"); empty: none
  // Written even when it holds its default (tp, pp, ep, cp, policy, kind, job).
  bool always_written = false;
  // kString / kWorkload: further check of a value (empty string_view = accepted).
  Result<void> (*check)(std::string_view value) = nullptr;
  std::string_view alias = {};  // a second JSON key read as this one (the CLI flag's spelling)
  // kString: the CLI flag may be repeated; its values are joined with commas (--slice-layer).
  bool repeatable = false;
};

// Every row, in the order of `toposched place --help`.
std::span<const JobField> job_fields();
// The row of a JSON key (or its alias), or nullptr.
const JobField* find_job_field(std::string_view key);

// The largest count any size field accepts: a job request never asks for more GPUs than this.
inline constexpr std::int64_t kMaxCount = 1'000'000'000;

// Sets the field from text (a CLI value or an annotation): parsed by the row's type and
// checked against its bounds. kInvalidArgument "must be ..., found '...'" without the
// field's name (the caller says whether it came from a flag, a key or an annotation).
Result<void> set_job_field_from_text(const JobField& field, std::string_view text, PlaceRequest& request);
// Sets the field from a JSON value: kInvalidArgument "'key' must be ..., found ...".
Result<void> set_job_field_from_json(const JobField& field, const nlohmann::json& value, PlaceRequest& request);
// Adds the field to `out` under its key unless it holds the default of a fresh request
// (rows marked always_written are always added).
void write_job_field_json(const JobField& field, const PlaceRequest& request, nlohmann::ordered_json& out);

// Job ids travel in URLs (/v1/jobs/{id}), log lines and Slurm comments: non-empty, at most
// 253 characters, no '/', '?', '#', '%', spaces or control characters.
Result<void> check_job_id(std::string_view id);

// tp x cp x ep x pp (x dp when dp > 0) as a checked product: kInvalidArgument naming the
// degrees when it exceeds kMaxCount, instead of wrapping.
Result<std::int64_t> parallel_product(const JobRequest& r, bool with_dp);

}  // namespace toposched
