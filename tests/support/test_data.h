// Test helpers for the fixtures under tests/data (TOPOSCHED_TEST_DATA): a fixture's text, or
// an empty string and a test failure naming it; and a discovered node by name. Header-only;
// call from test bodies (the failure is recorded on the calling test).
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "formats/discovered.h"
#include "topology/file_io.h"

namespace toposched::testing {

// The text of tests/data/<relative> ("discovery/k8s-nodes.json").
inline std::string test_data_text(const std::string& relative) {
  auto text = read_text_file(std::string(TOPOSCHED_TEST_DATA) + "/" + relative);
  EXPECT_TRUE(text) << relative << ": " << (text ? "" : text.error().to_string());
  return text ? *text : std::string();
}

// The node of that name in a reader's result; nullptr when it has none.
inline const DiscoveredNode* find_discovered_node(const DiscoveredTopology& t, std::string_view name) {
  for (const auto& n : t.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

}  // namespace toposched::testing
