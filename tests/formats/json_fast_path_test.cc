// formats/json_fast_path.h: which texts the simdjson fast paths may try at all. Their readers'
// own tests (k8s_nodes_paths_test.cc, the state file's and the Philly trace's) hold each fast
// path to its exact reader's answers; these pin the text checks themselves.
#include <gtest/gtest.h>

#include <string>

#include "formats/json_fast_path.h"

namespace toposched::json_fast_path {
namespace {

TEST(JsonFastPath, ALineBreakBetweenAKeyAndItsColonIsFound) {
  EXPECT_TRUE(line_break_before_a_colon("{\"a\"\n: 1}"));
  EXPECT_TRUE(line_break_before_a_colon("{\"a\": {\"b\" \r\n  : 2}}"));
  EXPECT_TRUE(line_break_before_a_colon("{\"a\\\\\"\n: 1}"));  // the key ends in an escaped backslash
  EXPECT_FALSE(line_break_before_a_colon("{\"a\":\n 1, \"b\": \"x\"\n}"));  // after the colon, after a value
  EXPECT_FALSE(line_break_before_a_colon("{\"a\\\"\n: \": 1}"));  // inside a key with an escaped quote
  EXPECT_FALSE(line_break_before_a_colon("[\"a\",\n\"b\"]"));
  EXPECT_FALSE(line_break_before_a_colon("{\"open"));
  EXPECT_FALSE(line_break_before_a_colon(""));
}

TEST(JsonFastPath, OnlyYamlCppFastPathsDeclineIt) {
  const std::string text = "{\"items\"\n: []}";
  EXPECT_FALSE(fast_path_may_read(text));
  EXPECT_FALSE(fast_path_may_read(text, '{', ExactReader::kYamlCpp));
  EXPECT_TRUE(fast_path_may_read(text, '{', ExactReader::kNlohmann));  // valid JSON to nlohmann too
  EXPECT_TRUE(fast_path_may_read("{\"items\": []}"));
  EXPECT_FALSE(fast_path_may_read("\xEF\xBB\xBF{\"items\": []}"));  // a byte order mark
  EXPECT_FALSE(fast_path_may_read("{\"a\": \"\\u00e9\"}"));
  EXPECT_FALSE(fast_path_may_read("{\"a\": 1}\r"));
  EXPECT_FALSE(fast_path_may_read("[1]"));
  EXPECT_TRUE(fast_path_may_read("[1]", '['));
}

}  // namespace
}  // namespace toposched::json_fast_path
