// The JSON rules of formats/: output must be valid UTF-8 (rejected with the JSON pointer of
// the bad string), and JSON-only input is one document without repeated keys.
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/json_input.h"
#include "formats/json_output.h"

namespace toposched {
namespace {

TEST(Utf8, ValidTextPasses) {
  EXPECT_FALSE(first_invalid_utf8(""));
  EXPECT_FALSE(first_invalid_utf8("plain ascii"));
  EXPECT_FALSE(first_invalid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"));  // é € 🚀
  EXPECT_FALSE(first_invalid_utf8("\xf4\x8f\xbf\xbf"));                          // U+10FFFF
}

TEST(Utf8, InvalidBytesAreFoundAtTheirOffset) {
  EXPECT_EQ(first_invalid_utf8("j\x99"), 1u);             // lone continuation byte
  EXPECT_EQ(first_invalid_utf8("ab\xc3"), 2u);            // truncated sequence
  EXPECT_EQ(first_invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(first_invalid_utf8("x\xed\xa0\x80"), 1u);     // UTF-16 surrogate
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("ok\xff"), 2u);
  EXPECT_EQ(first_invalid_utf8("\xe2\x82x"), 0u);         // bad third byte
}

TEST(JsonOutput, InvalidStringIsRejectedWithItsPath) {
  nlohmann::ordered_json j = {{"job", "ok"}, {"gpus", {{{"node", "n\x99"}, {"gpu", 0}}}}};
  auto r = dump_json(j, 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kValidation);
  EXPECT_NE(r.error().message.find("the string at '/gpus/0/node' is not valid UTF-8 (byte 0x99 at offset 1 of 'n\\x99')"),
            std::string::npos)
      << r.error().message;
}

TEST(JsonOutput, InvalidKeyIsRejected) {
  nlohmann::json j;
  j["policies"]["fi\xffrst"] = 1;
  auto r = dump_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("the key at '/policies/fi\\xffrst'"), std::string::npos) << r.error().message;
}

TEST(JsonOutput, ValidDocumentDumpsAsNlohmannDoes) {
  nlohmann::ordered_json j = {{"name", "caf\xc3\xa9"}, {"n", 3}, {"list", {1, "two", nullptr}}};
  auto r = dump_json(j, 2);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, j.dump(2));
}

TEST(JsonOutput, RoundDecimalsKeepsReportsByteStable) {
  EXPECT_EQ(round_decimals(0.1234567, 6), 0.123457);
  EXPECT_EQ(round_decimals(2.5, 0), 3.0);
  EXPECT_EQ(round_decimals(1e-9, 6), 0.0);
  EXPECT_FALSE(std::signbit(round_decimals(-1e-9, 6)));  // no "-0.0" in a report
  EXPECT_EQ(round_decimals(std::numeric_limits<double>::infinity(), 3), 0.0);
  EXPECT_EQ(round_decimals(std::nan(""), 3), 0.0);
  EXPECT_EQ(nlohmann::json(round_decimals(0.1 + 0.2, 6)).dump(), "0.3");
}

TEST(JsonInput, RepeatedKeyNamesBothLines) {
  auto r = parse_json_document("[{\"jobid\": \"a\",\n  \"user\": \"u\",\n  \"jobid\": \"b\"}]", "log.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().to_string(), "log.json:3:3: key 'jobid' repeated, first at line 1");
}

TEST(JsonInput, SameKeyInSiblingAndNestedObjectsIsFine) {
  auto r = parse_json_document(R"([{"a": 1, "b": {"a": 2}}, {"a": 3}])", "ok.json");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ((*r)[1]["a"], 3);
}

TEST(JsonInput, KeysWithEscapedQuotes) {
  auto r = parse_json_document("{\"a\\\"b\": 1,\n\"a\\\"b\": 2}", "q.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().where.line, 2);
  EXPECT_EQ(r.error().where.column, 1);
}

TEST(JsonInput, TrailingContentAndSyntaxErrorsHavePositions) {
  auto trailing = parse_json_document("[1, 2]\n  x", "t.json");
  ASSERT_FALSE(trailing);
  EXPECT_EQ(trailing.error().where.line, 2);
  auto bad = parse_json_document("{\"a\": [1,\n 2,,]}", "b.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where.line, 2);
}

TEST(JsonInput, OffsetLocatorMatchesTheDirectComputation) {
  const std::string text = "ab\ncd\n\nefg";
  OffsetLocator loc(text, "f");
  for (std::size_t off : {0u, 1u, 3u, 6u, 7u, 9u, 2u, 10u}) {
    auto a = loc.at(off), b = location_of_offset(text, off, "f");
    EXPECT_EQ(a.line, b.line) << off;
    EXPECT_EQ(a.column, b.column) << off;
  }
  EXPECT_EQ(location_of_offset(text, 7, "f").line, 4);
}

}  // namespace
}  // namespace toposched
