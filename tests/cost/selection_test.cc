// Sizes with K/M/G suffixes and GPU selections (SEL).
#include <gtest/gtest.h>

#include "cost/selection.h"
#include "topology/presets.h"

namespace toposched {
namespace {

TEST(Size, SuffixesArePowersOf1024) {
  EXPECT_EQ(*parse_size("8"), 8);
  EXPECT_EQ(*parse_size("8K"), 8192);
  EXPECT_EQ(*parse_size("8k"), 8192);
  EXPECT_EQ(*parse_size("1M"), 1 << 20);
  EXPECT_EQ(*parse_size("8G"), 8.0 * (1ull << 30));
  EXPECT_EQ(*parse_size("8GB"), 8.0 * (1ull << 30));
  EXPECT_EQ(*parse_size("8GiB"), 8.0 * (1ull << 30));
  EXPECT_EQ(*parse_size("1T"), 1.0 * (1ull << 40));
  EXPECT_EQ(*parse_size("1.5K"), 1536);
  EXPECT_EQ(*parse_size(" 64M "), 64 << 20);
  EXPECT_EQ(*parse_size("0"), 0);
}

TEST(Size, BadSizesAreErrors) {
  for (const char* bad : {"", "G", "8X", "8KK", "-8", "1..2K", ".", "8 G B", "8iB", "1e3", "99999999999T"}) {
    auto r = parse_size(bad);
    EXPECT_FALSE(r.has_value()) << bad;
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(Size, Format) {
  EXPECT_EQ(format_size(8), "8");
  EXPECT_EQ(format_size(8192), "8K");
  EXPECT_EQ(format_size(3.0 * (1ull << 30)), "3G");
  EXPECT_EQ(format_size(1536), "1.5K");
}

class Selection : public ::testing::Test {
 protected:
  Cluster c = *build_preset("dgx-h100?nodes=4");
  std::vector<std::string> labels(std::string_view sel) {
    auto r = parse_gpu_selection(c, sel);
    EXPECT_TRUE(r.has_value()) << sel << ": " << (r ? "" : r.error().message);
    std::vector<std::string> out;
    if (r)
      for (GpuId g : *r) out.push_back(gpu_label(c, g));
    return out;
  }
};

TEST_F(Selection, WholeNodesByHostlist) {
  auto l = labels("dgx-h100-[001-004]");
  ASSERT_EQ(l.size(), 32u);
  EXPECT_EQ(l[0], "dgx-h100-001:0");
  EXPECT_EQ(l[8], "dgx-h100-002:0");
  EXPECT_EQ(l[31], "dgx-h100-004:7");
  EXPECT_EQ(labels("dgx-h100-[001,003]").size(), 16u);
  EXPECT_EQ(labels("dgx-h100-002").size(), 8u);
}

TEST_F(Selection, GpuRangesKeepTheWrittenOrder) {
  EXPECT_EQ(labels("dgx-h100-002:3,dgx-h100-001:0-1"),
            (std::vector<std::string>{"dgx-h100-002:3", "dgx-h100-001:0", "dgx-h100-001:1"}));
  EXPECT_EQ(labels("dgx-h100-[001-002]:6-7"),
            (std::vector<std::string>{"dgx-h100-001:6", "dgx-h100-001:7", "dgx-h100-002:6", "dgx-h100-002:7"}));
}

TEST_F(Selection, MistakesAreClearErrors) {
  struct Case {
    const char* sel;
    const char* says;
  };
  for (const Case& k :
       {Case{"dgx-h100-009", "no node named 'dgx-h100-009'"}, Case{"dgx-h100-001:8", "GPUs 0..7"},
        Case{"dgx-h100-001:0-3,dgx-h100-001:3", "selected twice"}, Case{"dgx-h100-001,,dgx-h100-002", "empty item"},
        Case{"dgx-h100-001:x", "GPU index"}, Case{"dgx-h100-001:3-1", "GPU index"},
        Case{"dgx-h100-[001-", "dgx-h100-[001-"}, Case{"", "empty item"},
        // More names than the cluster has nodes is refused before they are built (found by
        // fuzz_placement_file: 8 million names took over 10 s).
        Case{"dgx-h100-[001-005]", "more than 4"}, Case{"dgx-h100-[002-9004]0-[002-904]", "has 4 nodes"}}) {
    auto r = parse_gpu_selection(c, k.sel);
    ASSERT_FALSE(r.has_value()) << k.sel;
    EXPECT_NE(r.error().message.find(k.says), std::string::npos) << k.sel << " -> " << r.error().message;
  }
}

}  // namespace
}  // namespace toposched
