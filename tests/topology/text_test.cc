// topology/text: the one ASCII case mapping, trim and offset-to-line:column every reader uses.
#include "topology/text.h"

#include <gtest/gtest.h>

namespace toposched {
namespace {

TEST(Text, CaseMappingTouchesAsciiLettersOnly) {
  EXPECT_EQ(ascii_lower("GB200-NVL72 h100"), "gb200-nvl72 h100");
  EXPECT_EQ(ascii_upper("running_Gpu"), "RUNNING_GPU");
  // UTF-8 bytes and punctuation stay as they are, whatever the locale.
  EXPECT_EQ(ascii_lower("\xC3\x89T\xC3\x89"), "\xC3\x89t\xC3\x89");
  EXPECT_EQ(ascii_lower(""), "");
  EXPECT_TRUE(equals_ignoring_ascii_case("Content-Length", "content-LENGTH"));
  EXPECT_FALSE(equals_ignoring_ascii_case("Content-Length", "Content-Lengt"));
  EXPECT_FALSE(equals_ignoring_ascii_case("a", "b"));
}

TEST(Text, TrimDropsAsciiSpaceAtBothEnds) {
  EXPECT_EQ(trim(" \t\r\n\v\fa b\t\n"), "a b");
  EXPECT_EQ(trim("   "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("x"), "x");
  EXPECT_EQ(trim("\xC2\xA0x"), "\xC2\xA0x");  // a no-break space is not ASCII space
  EXPECT_TRUE(is_ascii_space('\f'));
  EXPECT_FALSE(is_ascii_space('_'));
}

TEST(Text, LocationOfCountsLinesAndByteColumns) {
  const std::string text = "ab\ncd\n\nefg";
  auto at = [&](std::size_t offset) {
    SourceLocation l = location_of(text, offset, "f");
    return std::pair{l.line, l.column};
  };
  EXPECT_EQ(at(0), (std::pair{1, 1}));
  EXPECT_EQ(at(2), (std::pair{1, 3}));  // the newline itself is on its line
  EXPECT_EQ(at(3), (std::pair{2, 1}));
  EXPECT_EQ(at(6), (std::pair{3, 1}));
  EXPECT_EQ(at(9), (std::pair{4, 3}));
  EXPECT_EQ(at(99), (std::pair{4, 4}));  // past the end: the end
  EXPECT_EQ(location_of(text, 0, "f").file, "f");
}

TEST(Text, OffsetLocatorMatchesLocationOfInAnyOrder) {
  const std::string text = "ab\ncd\n\nefg";
  OffsetLocator loc(text, "f");
  for (std::size_t off : {0u, 1u, 3u, 6u, 7u, 9u, 2u, 10u, 4u}) {
    auto a = loc.at(off), b = location_of(text, off, "f");
    EXPECT_EQ(a.line, b.line) << off;
    EXPECT_EQ(a.column, b.column) << off;
  }
}

}  // namespace
}  // namespace toposched
