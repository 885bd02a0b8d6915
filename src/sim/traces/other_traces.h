// Readers for three public GPU-cluster traces, by their published column layouts
// (docs/traces.md cites each):
//  - Alibaba PAI cluster-trace-gpu-v2020: pai_task_table.csv (job_name,task_name,inst_num,
//    status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type; no header in the
//    release; plan_gpu in percent of one GPU per instance) and optionally pai_job_table.csv
//    (job_name,inst_id,user,status,start_time,end_time), whose start_time is the submit time.
//    A job is the gang of all its tasks' instances: GPUs = sum of inst_num * ceil(plan_gpu/100).
//  - Microsoft Philly cluster_job_log: a JSON array of {jobid, submitted_time, status,
//    attempts:[{start_time,end_time,detail:[{ip,gpus:[...]}]}]}; GPUs = the largest attempt,
//    runtime = first attempt's start to the last attempt's end.
//  - SenseTime Helios (HeliosData) cluster_log.csv: job_id,user,gpu_num,cpu_num,node_num,
//    state,submit_time,start_time,end_time,duration,queue (header; times as
//    "YYYY-MM-DD HH:MM:SS", duration in seconds).
// Jobs without GPUs or that never ran count as ignored_rows. Times are shifted so that the
// earliest submit is 0. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sim/trace.h"

namespace toposched::sim {

struct TextFile {
  std::string_view text;
  std::string name;
};

Result<Trace> read_pai_v2020(const TextFile& task_table, const std::optional<TextFile>& job_table,
                             const TraceReadOptions& options = {});
Result<Trace> read_philly(std::string_view text, const std::string& file, const TraceReadOptions& options = {});
// read_philly's two paths, for tests. The fast one reads the log with simdjson On Demand,
// job by job, and answers only where it gives the exact path's answer (the same jobs, or
// the same error from finalize_trace); for any row the exact path refuses, a repeated key
// or JSON it does not read as nlohmann does (docs/traces.md) it returns nullopt. The exact
// one parses the whole document with parse_json_document (nlohmann) and reports each
// error with its file:line:col.
std::optional<Result<Trace>> read_philly_fast(std::string_view text, const std::string& file);
Result<Trace> read_philly_exact(std::string_view text, const std::string& file, const TraceReadOptions& options = {});
Result<Trace> read_helios(std::string_view text, const std::string& file, const TraceReadOptions& options = {});

}  // namespace toposched::sim
