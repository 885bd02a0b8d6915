// The job-request flags of the command line, registered from the job-request schema
// (placement/job_schema.h): one CLI11 option per schema row, bound to that row's member of
// a PlaceRequest, with the row's help text and its bounds as the option's check, so that a
// flag accepts exactly what the same JSON key of POST /v1/jobs accepts. Single-threaded
// (CLI11 parsing).
#pragma once

#include <span>
#include <string_view>

#include <CLI/CLI.hpp>

#include "placement/job_schema.h"

namespace toposched::cli {

// Adds the flags of the rows named by `keys` (every row that has a flag when empty) to
// `cmd`, in the schema's order, bound to `target` (which must outlive the parse).
void add_job_request_flags(CLI::App& cmd, PlaceRequest& target, std::span<const std::string_view> keys = {});

}  // namespace toposched::cli
