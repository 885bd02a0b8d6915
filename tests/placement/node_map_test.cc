// NodeMap (placement/select_util.h): the per-node scratch of a decision must behave as the
// std::unordered_map it replaced: operator[] inserts V{}, get() reads without inserting,
// for_each visits every present node once, and copies are independent.
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "placement/select_util.h"

namespace toposched {
namespace {

TEST(NodeMap, MatchesAStdMapOnRandomOperations) {
  std::mt19937_64 rng(5);
  NodeMap<int> m;
  std::map<std::uint32_t, int> ref;
  for (int step = 0; step < 20000; ++step) {
    // Keys from a small range (repeats) and a large one (growth past many capacities).
    const std::uint32_t key = step % 3 == 0 ? static_cast<std::uint32_t>(rng() % 50)
                                            : static_cast<std::uint32_t>(rng() % 100000);
    if (rng() % 3 == 0) {
      const auto it = ref.find(key);
      ASSERT_EQ(m.get(key), it == ref.end() ? 0 : it->second) << "key " << key;
    } else {
      const int add = static_cast<int>(rng() % 7) + 1;
      m[key] += add;
      ref[key] += add;
    }
    ASSERT_EQ(m.size(), ref.size());
  }
  std::map<std::uint32_t, int> seen;
  m.for_each([&](std::uint32_t k, int v) { EXPECT_TRUE(seen.emplace(k, v).second) << "visited twice: " << k; });
  EXPECT_EQ(seen, ref);
}

TEST(NodeMap, GetInsertsNothingAndCopiesAreIndependent) {
  NodeMap<std::uint64_t> a;
  EXPECT_EQ(a.get(7), 0u);
  EXPECT_EQ(a.size(), 0u);
  a[7] |= 4;
  a[0] = 1;  // node 0 is a key like any other
  NodeMap<std::uint64_t> b = a;
  b[7] |= 1;
  b[12] = 3;
  EXPECT_EQ(a.get(7), 4u);
  EXPECT_EQ(a.get(12), 0u);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.get(7), 5u);
  EXPECT_EQ(b.get(0), 1u);
  EXPECT_EQ(b.size(), 3u);
}

}  // namespace
}  // namespace toposched
