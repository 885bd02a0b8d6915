// Command-line style inputs of the cost model that need only the topology: message sizes
// with K/M/G/T suffixes (powers of 1024) and GPU selections (SEL).
//
// SEL is a comma-separated list of items; an item is NODE:INDEX, NODE:FIRST-LAST, or a
// node name or Slurm hostlist expression of whole nodes ("dgx-h100-[001-004]"), optionally
// followed by :INDEX or :FIRST-LAST applied to each of its nodes. Commas inside brackets
// belong to the hostlist. The result keeps the order written; a GPU selected twice is an
// error. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched {

// "8", "8K", "1.5M", "8G", "8GB", "8GiB", "1T" (case-insensitive suffix). Errors
// (kInvalidArgument) name the text and what is accepted.
Result<double> parse_size(std::string_view text);
// 8 -> "8", 8192 -> "8K", 3 * 2^30 -> "3G"; non-multiples with one decimal ("1.5K").
std::string format_size(double bytes);

Result<std::vector<GpuId>> parse_gpu_selection(const Cluster& cluster, std::string_view sel);

// "NODE:INDEX" of a GPU.
std::string gpu_label(const Cluster& cluster, GpuId gpu);

}  // namespace toposched
