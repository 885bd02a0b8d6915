#include "topology/hostlist.h"

#include <gtest/gtest.h>

#include <random>

namespace toposched {
namespace {

std::vector<std::string> expand_ok(std::string_view s) {
  auto r = expand_hostlist(s);
  EXPECT_TRUE(r.has_value()) << s << ": " << (r ? "" : r.error().to_string());
  return r ? *r : std::vector<std::string>{};
}

TEST(Hostlist, ExpandsPlainNamesAndLists) {
  EXPECT_EQ(expand_ok("login1"), (std::vector<std::string>{"login1"}));
  EXPECT_EQ(expand_ok("a,b,c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Hostlist, ExpandsRangesWithZeroPadding) {
  EXPECT_EQ(expand_ok("dgx[001-003]"), (std::vector<std::string>{"dgx001", "dgx002", "dgx003"}));
  EXPECT_EQ(expand_ok("n[8-11]"), (std::vector<std::string>{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_ok("n[08-11]"), (std::vector<std::string>{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_ok("n[1,3,5-6]"), (std::vector<std::string>{"n1", "n3", "n5", "n6"}));
}

TEST(Hostlist, ExpandsSeveralBracketGroupsLeftmostSlowest) {
  EXPECT_EQ(expand_ok("rack[1-2]-n[01-02]"),
            (std::vector<std::string>{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(expand_ok("a[1-2]b,c[3]"), (std::vector<std::string>{"a1b", "a2b", "c3"}));
}

TEST(Hostlist, RejectsMalformedExpressionsWithColumn) {
  struct Case {
    const char* text;
    int column;
  };
  for (Case c : {Case{"dgx[001-003", 4}, Case{"dgx001-003]", 11}, Case{"dgx[3-1]", 5}, Case{"dgx[a-b]", 5},
                 Case{"dgx[]", 5}, Case{"a,,b", 3}, Case{"a,", 3}, Case{"", 1}, Case{"d[1-2[3]]", 6},
                 Case{"n[1,]", 5}, Case{"has space", 4}}) {
    auto r = expand_hostlist(c.text);
    ASSERT_FALSE(r.has_value()) << c.text;
    EXPECT_EQ(r.error().code, ErrorCode::kParse) << c.text;
    EXPECT_EQ(r.error().where.column, c.column) << c.text << ": " << r.error().message;
  }
}

TEST(Hostlist, RefusesHugeExpansions) {
  auto r = expand_hostlist("n[0-99999999999]");
  ASSERT_FALSE(r.has_value());
  auto r2 = expand_hostlist("a[0-9999]b[0-9999]");
  ASSERT_FALSE(r2.has_value());
  EXPECT_NE(r2.error().message.find("too many"), std::string::npos);
}

TEST(Hostlist, HonoursTheCallersBound) {
  EXPECT_EQ(expand_hostlist("n[1-4]", 4)->size(), 4u);
  EXPECT_EQ(expand_hostlist("a[1-2]b[1-2]", 4)->size(), 4u);
  for (const char* text : {"n[1-5]", "n[1-3,7-8]", "a[1-2]b[1-3]", "n[1-2],m[1-3]"}) {
    auto r = expand_hostlist(text, 4);
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_NE(r.error().message.find("more than 4"), std::string::npos) << text << ": " << r.error().message;
  }
}

TEST(Hostlist, CompressesConsecutiveRunsInOrder) {
  EXPECT_EQ(compress_hostlist({"dgx001", "dgx002", "dgx003"}), "dgx[001-003]");
  EXPECT_EQ(compress_hostlist({"n1", "n2", "n3", "n5", "n9", "n10"}), "n[1-3,5,9-10]");
  EXPECT_EQ(compress_hostlist({"n3", "n1"}), "n[3,1]");
  EXPECT_EQ(compress_hostlist({"a1", "b1", "a2"}), "a1,b1,a2");
  EXPECT_EQ(compress_hostlist({"login"}), "login");
  EXPECT_EQ(compress_hostlist({}), "");
}

TEST(Hostlist, CompressesSeveralDimensions) {
  auto names = expand_ok("rack[1-2]-n[01-18]");
  EXPECT_EQ(compress_hostlist(names), "rack[1-2]-n[01-18]");
  auto pods = expand_ok("p[1-8]-r[001-192]-s[1-2]");
  EXPECT_EQ(compress_hostlist(pods), "p[1-8]-r[001-192]-s[1-2]");
}

TEST(Hostlist, KeepsPaddingClassesApart) {
  // "n01" and "n2" cannot share a bracket: "n[01-02]" would turn n2 into n02.
  auto s = compress_hostlist({"n01", "n2"});
  EXPECT_EQ(expand_ok(s), (std::vector<std::string>{"n01", "n2"}));
  EXPECT_EQ(compress_hostlist({"n09", "n10", "n11"}), "n[09-11]");
}

TEST(Hostlist, RoundTripsRandomNameSets) {
  std::mt19937 rng(42);
  const std::vector<std::string> prefixes = {"dgx", "gpu-", "rack1-n", "x"};
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<std::string> names;
    int count = 1 + static_cast<int>(rng() % 40);
    int width = static_cast<int>(rng() % 4);
    for (int i = 0; i < count; ++i) {
      const auto& p = prefixes[rng() % prefixes.size()];
      int num = static_cast<int>(rng() % 120);
      std::string digits = std::to_string(num);
      if (width > 0 && static_cast<int>(digits.size()) < width) digits.insert(0, static_cast<std::size_t>(width) - digits.size(), '0');
      names.push_back(p + digits + (rng() % 5 == 0 ? "-ib" : ""));
    }
    std::string compressed = compress_hostlist(names);
    EXPECT_EQ(expand_ok(compressed), names) << compressed;
    // compress(expand(x)) is a fixed point.
    EXPECT_EQ(compress_hostlist(expand_ok(compressed)), compressed);
  }
}

}  // namespace
}  // namespace toposched
