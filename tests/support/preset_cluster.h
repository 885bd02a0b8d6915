// Test helper: a built-in preset by its spec ("dgx-h100?nodes=16"), or a test failure naming
// the spec and the error, after which the test program stops (no test can go on without its
// cluster, and the Cluster it would return does not exist). Header-only.
#pragma once

#include <cstdlib>
#include <string_view>

#include <gtest/gtest.h>

#include "topology/presets.h"

namespace toposched::testing {

inline Cluster preset(std::string_view spec) {
  auto c = build_preset(spec);
  if (!c) {
    ADD_FAILURE() << "preset " << spec << ": " << c.error().message;
    std::abort();
  }
  return std::move(*c);
}

}  // namespace toposched::testing
