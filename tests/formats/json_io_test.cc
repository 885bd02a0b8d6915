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

// A bad byte deep in a long value (a fuzzed hostlist of 3 million names printed 217 MB of
// message before): the message quotes 40 bytes on each side of it.
TEST(JsonOutput, LongInvalidStringIsQuotedAroundTheBadByte) {
  std::string hostlist = std::string(100000, 'a') + "\xf6" + std::string(100000, 'b');
  nlohmann::ordered_json j = {{"hostlist", hostlist}};
  auto r = dump_json(j, 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("(byte 0xf6 at offset 100000 of '..." + std::string(40, 'a') + "\\xf6" +
                                   std::string(39, 'b') + "...')"),
            std::string::npos)
      << r.error().message.substr(0, 300);
  EXPECT_LT(r.error().message.size(), 400u);
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

TEST(JsonInput, AnEarlyEndSaysTruncatedAndWhere) {
  for (std::string_view text : {"", "  \n", "{\"a\": [1,\n 2", "{\"a\": \"b"}) {
    auto r = parse_json_document(text, "cut.json");
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().message, "the JSON ends early (truncated output?): expected more, found the end") << text;
  }
  auto cut = parse_json_document("{\"a\": [1,\n 2", "cut.json");
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().where.line, 2);
  EXPECT_EQ(cut.error().where.column, 3);
  // A wrong character before the end is not called truncated.
  auto wrong = parse_json_document("{\"a\": [1,\n 2 x", "cut.json");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message.rfind("not valid JSON", 0), 0u) << wrong.error().message;
}

TEST(JsonInput, FirstLineNumbersARowOfALargerFile) {
  auto r = parse_json_document("{\"a\": 1,\n \"a\": 2}", "rows.jsonl", 40);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().to_string(), "rows.jsonl:41:2: key 'a' repeated, first at line 40");
}

TEST(JsonFields, TypedReadsNameTheSourceAndTheKey) {
  const nlohmann::json record = nlohmann::json::parse(
      R"({"id": "a", "n": 7, "big": 18446744073709551615, "gpus": ["x", "y"], "mixed": ["x", 1], "on": true})");
  auto fields = JsonFields::of(record, "etcd key /p/jobs/a");
  ASSERT_TRUE(fields);
  EXPECT_EQ(*fields->string("id"), "a");
  EXPECT_EQ(*fields->integer("n"), 7);
  EXPECT_EQ(*fields->strings("gpus"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(*fields->opt_boolean("on"), std::optional<bool>(true));
  EXPECT_EQ(*fields->opt_string("absent"), std::nullopt);
  EXPECT_EQ(*fields->opt_integer("absent"), std::nullopt);
  EXPECT_EQ(fields->string("n").error().to_string(), "etcd key /p/jobs/a: 'n': expected a string, found 7");
  EXPECT_EQ(fields->integer("id").error().to_string(),
            "etcd key /p/jobs/a: 'id': expected an integer (64-bit), found \"a\"");
  EXPECT_EQ(fields->integer("big").error().to_string(),
            "etcd key /p/jobs/a: 'big': expected an integer (64-bit), found 18446744073709551615");
  EXPECT_EQ(fields->strings("mixed").error().to_string(),
            "etcd key /p/jobs/a: 'mixed': expected an array of strings, found an array of 2 element(s)");
  EXPECT_EQ(fields->string("absent").error().to_string(), "etcd key /p/jobs/a: 'absent': expected this member, found none");
  EXPECT_EQ(fields->opt_string("n").error().code, ErrorCode::kParse);
  EXPECT_EQ(fields->opt_boolean("id").error().to_string(), "etcd key /p/jobs/a: 'id': expected true or false, found \"a\"");
  auto not_object = JsonFields::of(record["gpus"], "sqlite row 3");
  ASSERT_FALSE(not_object);
  EXPECT_EQ(not_object.error().to_string(), "sqlite row 3: expected a JSON object, found an array of 2 element(s)");
  EXPECT_EQ(json_string_array(record["mixed"], "row").error().to_string(),
            "row: expected an array of strings, found an array of 2 element(s)");
  EXPECT_EQ(*json_string_array(record["gpus"], "row"), (std::vector<std::string>{"x", "y"}));
}

}  // namespace
}  // namespace toposched
