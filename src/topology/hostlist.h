// Slurm hostlist expressions: "dgx[001-032]", "rack[1-2]-n[01-18],login1".
// expand_hostlist follows Slurm's rules: comma-separated items, bracket groups of numbers
// and ranges, zero padding taken from the range's first bound, several bracket groups per
// item expanded leftmost-slowest. compress_hostlist keeps the given order (it merges only
// consecutive names) so that expand(compress(names)) == names. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "topology/error.h"

namespace toposched {

// Refuses expressions that would expand to more than this many names.
inline constexpr std::size_t kMaxHostlistNames = 10'000'000;

// Errors carry the 1-based column of the offending character in `where.column`.
// `max_names` bounds the expansion (a caller that can use at most N names, e.g. one that
// looks each name up among a cluster's N nodes, passes N): an expression naming more is
// refused before the names are built, so a few bytes cannot cost seconds and gigabytes.
Result<std::vector<std::string>> expand_hostlist(std::string_view expression,
                                                 std::size_t max_names = kMaxHostlistNames);

std::string compress_hostlist(const std::vector<std::string>& names);

}  // namespace toposched
