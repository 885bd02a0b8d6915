// Chained block hashes and the KV index fed by Dynamo-schema events.
#include <gtest/gtest.h>

#include <xxhash.h>

#include "router/kv_index.h"

namespace toposched::router {
namespace {

TEST(BlockHashes, AreChainedSoEqualPrefixesShareHashes) {
  auto a = sequence_hashes(std::vector<std::uint64_t>{7, 8, 9});
  auto b = sequence_hashes(std::vector<std::uint64_t>{7, 8, 10});
  auto c = sequence_hashes(std::vector<std::uint64_t>{6, 8, 9});
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
  EXPECT_NE(a[2], b[2]);
  // Same block content after a different prefix is a different block.
  EXPECT_NE(a[1], c[1]);
  EXPECT_NE(a[2], c[2]);
  // Dynamo: the first block's sequence hash is its local hash, XXH3-64 seed 1337 of the bytes.
  std::uint64_t seven = 7;
  EXPECT_EQ(a[0], XXH3_64bits_withSeed(&seven, 8, 1337));
  EXPECT_EQ(a[1], chain_hash(a[0], local_block_hash(8)));
}

TEST(KvIndex, LongestPrefixPerWorkerFromEvents) {
  KvIndex index(3);
  auto seq = sequence_hashes(std::vector<std::uint64_t>{1, 2, 3, 4});
  // Worker 0 stores the first three blocks in two events (the second names its parent).
  ASSERT_TRUE(index.apply({0, 1, KvStored{std::nullopt, {{seq[0], 0}, {seq[1], 0}}}}));
  ASSERT_TRUE(index.apply({0, 2, KvStored{seq[1], {{seq[2], 0}}}}));
  ASSERT_TRUE(index.apply({1, 1, KvStored{std::nullopt, {{seq[0], 0}}}}));
  std::vector<int> overlap;
  EXPECT_EQ(index.longest_prefixes(seq, overlap), 3);
  EXPECT_EQ(overlap, (std::vector<int>{3, 1, 0}));
  // Removing worker 0's second block cuts its prefix to one block.
  ASSERT_TRUE(index.apply({0, 3, KvRemoved{{seq[1]}}}));
  index.longest_prefixes(seq, overlap);
  EXPECT_EQ(overlap, (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(index.blocks(0), 2u);
  ASSERT_TRUE(index.apply({0, 4, KvCleared{}}));
  index.longest_prefixes(seq, overlap);
  EXPECT_EQ(overlap, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(index.blocks(0), 0u);
  EXPECT_EQ(index.distinct_blocks(), 1u);
}

TEST(KvIndex, RejectsBadEvents) {
  KvIndex index(2);
  auto seq = sequence_hashes(std::vector<std::uint64_t>{1, 2});
  auto orphan = index.apply({1, 1, KvStored{seq[0], {{seq[1], 0}}}});
  ASSERT_FALSE(orphan);
  EXPECT_EQ(orphan.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(index.blocks(1), 0u);
  auto bad_worker = index.apply({5, 1, KvCleared{}});
  ASSERT_FALSE(bad_worker);
  EXPECT_EQ(bad_worker.error().code, ErrorCode::kInvalidArgument);
}

TEST(KvIndex, ManyWorkersBeyondOneWord) {
  KvIndex index(200);
  auto seq = sequence_hashes(std::vector<std::uint64_t>{1, 2});
  index.store(150, seq[0]);
  index.store(150, seq[1]);
  index.store(3, seq[0]);
  std::vector<int> overlap;
  EXPECT_EQ(index.longest_prefixes(seq, overlap), 2);
  EXPECT_EQ(overlap[150], 2);
  EXPECT_EQ(overlap[3], 1);
  EXPECT_EQ(overlap[4], 0);
}

}  // namespace
}  // namespace toposched::router
