// Test helper of the fast-path reader tests (tests/formats/*_fast_test.cc): a fast path
// must, wherever it takes a file, give the general path's cluster with the same ids in the
// same order, and load_cluster_text must answer as the general path does (the same
// cluster, or the same error at the same file:line:col). Header-only; single-threaded
// (gtest expectations).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "formats/cluster_format.h"
#include "formats/cluster_source.h"
#include "formats/discovery.h"
#include "formats/native_spec.h"
#include "support/cluster_equal.h"

namespace toposched::testing {

// cluster_difference, the spec written of each, and the ids in the same order: switches
// (their children and nodes) and domains (their nodes). Empty when none differs.
inline std::string ordered_cluster_difference(const Cluster& a, const Cluster& b) {
  if (std::string d = cluster_difference(a, b); !d.empty()) return d;
  if (write_native_yaml(a) != write_native_yaml(b)) return "the spec written of each";
  for (std::uint32_t s = 0; s < a.switch_count(); ++s) {
    const SwitchId id(s);
    if (a.switch_name(id) != b.switch_name(id)) return "switch order at " + a.switch_name(id);
    if (a.switch_children(id) != b.switch_children(id)) return "children of " + a.switch_name(id);
    if (a.switch_nodes(id) != b.switch_nodes(id)) return "nodes of " + a.switch_name(id);
  }
  for (std::uint32_t d = 0; d < a.domain_count(); ++d)
    if (a.domain_nodes(DomainId(d)) != b.domain_nodes(DomainId(d)))
      return "nodes of domain " + a.domain(DomainId(d)).name;
  return "";
}

// Whether the fast path took `text` (`fast`: its answer; `want`: the general path's, the
// file named `file`); fails the test where they differ, or where load_cluster_text answers
// otherwise than the general path (for text detected as `format`: other text is refused
// by format detection, before any reader).
inline bool check_fast_path(std::string_view text, const std::optional<Cluster>& fast, const Result<Cluster>& want,
                            ClusterFormat format, const std::string& file) {
  if (fast) {
    EXPECT_TRUE(want) << text << "\n" << want.error().to_string();
    if (want) {
      EXPECT_EQ(ordered_cluster_difference(*fast, *want), "") << text;
    }
  }
  if (detect_cluster_format(text) != format) return fast.has_value();
  const auto loaded = load_cluster_text(text, file);
  EXPECT_EQ(loaded.has_value(), want.has_value()) << text;
  if (loaded && want) {
    EXPECT_EQ(ordered_cluster_difference(*loaded, *want), "") << text;
  } else if (!loaded && !want) {
    EXPECT_EQ(loaded.error().to_string(), want.error().to_string()) << text;
  }
  return fast.has_value();
}

// Every byte of `base` deleted, or replaced by a space, a line break, a colon or a quote,
// each result given to `check` (which asserts what must hold): how many `check` says the
// fast path took.
template <class Check>
int taken_under_byte_mutations(const std::string& base, Check check) {
  int taken = 0;
  for (std::size_t i = 0; i < base.size(); ++i) {
    std::string deleted = base;
    deleted.erase(i, 1);
    taken += check(deleted) ? 1 : 0;
    for (char c : {' ', '\n', ':', '"'}) {
      std::string changed = base;
      changed[i] = c;
      taken += check(changed) ? 1 : 0;
    }
  }
  return taken;
}

}  // namespace toposched::testing
