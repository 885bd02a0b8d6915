// Engines' KV events (router/kv_events.h): vLLM's msgpack batches in both encodings and every
// hash type, Dynamo's RouterEvent JSON, and the router's names for what they store (the
// chain of tokens hashes, as a route with token_ids computes it).
#include <gtest/gtest.h>

#include <msgpack.hpp>

#include "formats/cluster_source.h"
#include "router/api.h"
#include "router/kv_events.h"

namespace toposched::router {
namespace {

using Json = nlohmann::json;
using Packer = msgpack::packer<msgpack::sbuffer>;

std::vector<std::uint32_t> tokens(std::uint32_t first, std::size_t n) {
  std::vector<std::uint32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = first + static_cast<std::uint32_t>(i);
  return t;
}

enum class HashForm { kUint, kInt, kBytes };

void pack_hash(Packer& p, std::uint64_t h, HashForm form) {
  if (form == HashForm::kUint) p.pack_uint64(h);
  else if (form == HashForm::kInt) p.pack_int64(-static_cast<std::int64_t>(h));
  else {
    unsigned char b[32] = {};
    for (int k = 0; k < 8; ++k) b[k] = static_cast<unsigned char>(h >> (8 * k));
    p.pack_bin(32);
    p.pack_bin_body(reinterpret_cast<const char*>(b), 32);
  }
}

// One BlockStored of two 4-token blocks (hashes 101, 102, no parent), one BlockRemoved of
// 102, as vLLM's publisher encodes them: tagged arrays in an array batch, or maps with
// "type" in a map batch.
std::vector<std::byte> vllm_batch(bool maps, HashForm form) {
  msgpack::sbuffer buf;
  Packer p(buf);
  auto key = [&](const char* k) { p.pack(std::string(k)); };
  if (maps) {
    p.pack_map(3);
    key("ts");
    p.pack_double(1.5);
    key("events");
  } else {
    p.pack_array(3);
    p.pack_double(1.5);
  }
  p.pack_array(2);
  auto t = tokens(7, 8);
  if (maps) {
    p.pack_map(7);
    key("type"), p.pack(std::string("BlockStored"));
    key("block_hashes"), p.pack_array(2), pack_hash(p, 101, form), pack_hash(p, 102, form);
    key("parent_block_hash"), p.pack_nil();
    key("token_ids"), p.pack(t);
    key("block_size"), p.pack(4);
    key("lora_id"), p.pack_nil();
    key("medium"), p.pack(std::string("GPU"));
    p.pack_map(3);
    key("type"), p.pack(std::string("BlockRemoved"));
    key("block_hashes"), p.pack_array(1), pack_hash(p, 102, form);
    key("medium"), p.pack(std::string("GPU"));
    key("data_parallel_rank");
    p.pack(0);
  } else {
    p.pack_array(7);
    p.pack(std::string("BlockStored"));
    p.pack_array(2), pack_hash(p, 101, form), pack_hash(p, 102, form);
    p.pack_nil(), p.pack(t), p.pack(4), p.pack_nil(), p.pack(std::string("GPU"));
    p.pack_array(3);
    p.pack(std::string("BlockRemoved"));
    p.pack_array(1), pack_hash(p, 102, form);
    p.pack(std::string("GPU"));
    p.pack(0);
  }
  auto* d = reinterpret_cast<const std::byte*>(buf.data());
  return {d, d + buf.size()};
}

TEST(EngineEvents, BothEncodingsAndEveryHashTypeDecodeTheSame) {
  std::vector<std::vector<RouterEvent>> decoded;
  for (bool maps : {false, true})
    for (HashForm form : {HashForm::kUint, HashForm::kInt, HashForm::kBytes}) {
      auto payload = vllm_batch(maps, form);
      auto batch = decode_engine_batch(payload);
      ASSERT_TRUE(batch) << batch.error().to_string();
      EXPECT_DOUBLE_EQ(batch->ts, 1.5);
      ASSERT_EQ(batch->events.size(), 2u);
      const auto& stored = std::get<EngineBlockStored>(batch->events[0]);
      EXPECT_EQ(stored.block_size, 4);
      EXPECT_EQ(stored.token_ids.size(), 8u);
      EXPECT_FALSE(stored.parent_hash);
      EXPECT_EQ(stored.medium, "GPU");
      if (form == HashForm::kUint) {
        EXPECT_EQ(stored.block_hashes[0], 101u);
      }
      if (form == HashForm::kInt) {
        EXPECT_EQ(stored.block_hashes[0], static_cast<std::uint64_t>(-101));
      }
      // The same engine hash in one batch always gets the same name.
      EXPECT_EQ(std::get<EngineBlockRemoved>(batch->events[1]).block_hashes[0], stored.block_hashes[1]);
      auto events = engine_batch_to_router_events(*batch, 3, 4);
      ASSERT_TRUE(events) << events.error().to_string();
      decoded.push_back(*events);
    }
  // Whatever the encoding, the tokens hashes (what the router names blocks by) agree.
  for (const auto& d : decoded) {
    const auto& st = std::get<ExternalStored>(d[0].data);
    EXPECT_EQ(*st.blocks[0].tokens_hash, tokens_block_hash(tokens(7, 4)));
    EXPECT_EQ(*st.blocks[1].tokens_hash, tokens_block_hash(tokens(11, 4)));
    EXPECT_EQ(d[0].worker_id, 3u);
  }
}

TEST(EngineEvents, BadPayloadsSayWhere) {
  std::vector<std::byte> junk = {std::byte{0xc1}};
  auto j = decode_engine_batch(junk);
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error().code, ErrorCode::kParse);
  msgpack::sbuffer buf;
  Packer p(buf);
  p.pack_array(2), p.pack_double(0), p.pack_array(1), p.pack_array(3), p.pack(std::string("BlockStored"));
  p.pack_array(1), p.pack(std::string("not a hash")), p.pack_nil();
  auto bad = decode_engine_batch(std::as_bytes(std::span<const char>(buf.data(), buf.size())));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("events[0].block_hashes[0]"), std::string::npos) << bad.error().message;
  // A block size other than the router's is refused with both numbers.
  auto batch = decode_engine_batch(vllm_batch(false, HashForm::kUint));
  ASSERT_TRUE(batch);
  auto mismatch = engine_batch_to_router_events(*batch, 0, 16);
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().message.find("block_size 4"), std::string::npos) << mismatch.error().message;
}

TEST(EngineEvents, TokenSequenceHashesAreDynamosChain) {
  auto t = tokens(1, 10);  // two full blocks of 4 and a partial one, which is not hashed
  auto h = token_sequence_hashes(t, 4);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], tokens_block_hash(tokens(1, 4)));
  EXPECT_EQ(h[1], chain_hash(h[0], tokens_block_hash(tokens(5, 4))));
}

// Events with tokens hashes are found by a route with the same tokens, whatever the
// engine's own block hashes; Removed and parents go through the engine's names.
TEST(EngineEvents, RouterEventJsonMatchesTokenRoutes) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  auto service = RouterService::create(*cluster, {"llama3-8b", 4, 1, "kv", 4});
  ASSERT_TRUE(service) << service.error().to_string();
  const std::uint64_t big_id = 0x9e3779b97f4a7c15ull;
  auto t = tokens(100, 12);
  Json ev = {{"worker_id", big_id},
             {"storage_tier", "device"},
             {"event", {{"event_id", 1}, {"dp_rank", 1},
                        {"data", {{"stored", {{"parent_hash", nullptr},
                                              {"blocks", {{{"block_hash", -5}, {"tokens_hash", tokens_block_hash(tokens(100, 4))}},
                                                          {{"block_hash", 77}, {"tokens_hash", tokens_block_hash(tokens(104, 4))}}}}}}}}}}};
  auto applied = (*service)->kv_events(ev);
  ASSERT_TRUE(applied) << applied.error().to_string();
  // The third block, stored later under the engine's parent name 77.
  Json more = {{"worker_id", big_id}, {"event", {{"event_id", 2}, {"dp_rank", 1}, {"data", {{"stored", {{"parent_hash", 77},
               {"blocks", {{{"block_hash", 78}, {"tokens_hash", tokens_block_hash(tokens(108, 4))}}}}}}}}}}};
  ASSERT_TRUE((*service)->kv_events(more));
  auto r = (*service)->route(Json{{"token_ids", t}});
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ((*r)["overlap_blocks"], 3);
  EXPECT_EQ((*r)["worker_id"], big_id);
  EXPECT_EQ((*r)["dp_rank"], 1);
  const int slot = (*r)["worker"];
  EXPECT_EQ(slot, 0);  // a large id takes the lowest free slot
  // The same blocks by their chained names.
  EXPECT_EQ((*(*service)->route(Json{{"input_length", 12}, {"block_hashes", token_sequence_hashes(t, 4)}}))["overlap_blocks"], 3);
  // Removing the engine's block 77 cuts the prefix after the first block.
  ASSERT_TRUE((*service)->kv_events(Json{{"worker_id", big_id}, {"dp_rank", 1}, {"event", {{"data", {{"removed", {{"block_hashes", {77}}}}}}}}}));
  EXPECT_EQ((*(*service)->route(Json{{"token_ids", t}}))["overlap_blocks"], 1);
  // A host-memory tier is indexed beside the device tier, and reported.
  ASSERT_TRUE((*service)->kv_events(Json{{"worker_id", big_id}, {"dp_rank", 1}, {"storage_tier", "host_pinned"},
                                         {"event", {{"data", {{"stored", {{"parent_hash", nullptr},
                                          {"blocks", {{{"block_hash", 1}, {"tokens_hash", tokens_block_hash(tokens(100, 4))}}}}}}}}}}}));
  auto tiers = (*(*service)->route(Json{{"token_ids", t}}))["tier_overlap_blocks"];
  EXPECT_EQ(tiers["host_pinned"], 1) << tiers.dump();
  auto dump = (*service)->dump();
  EXPECT_EQ(dump["workers"][0]["blocks"]["device"].size(), 2u);  // blocks 1 and 3
  EXPECT_EQ(dump["workers"][0]["worker_id"], big_id);
  // An orphan parent is refused; a bad tier names the field.
  auto orphan = (*service)->kv_events(Json{{"worker_id", 2}, {"event", {{"data", {{"stored", {{"parent_hash", 5}, {"blocks", Json::array()}}}}}}}});
  ASSERT_FALSE(orphan);
  EXPECT_EQ(orphan.error().code, ErrorCode::kNotFound);
  auto tier = (*service)->kv_events(Json{{"worker_id", 2}, {"storage_tier", "tape"}, {"event", {{"data", "cleared"}}}});
  ASSERT_FALSE(tier);
  EXPECT_NE(tier.error().message.find("storage_tier"), std::string::npos);
}

// Host-pinned events (an engine's CPU-offloaded blocks) steer kv-topo: the worker whose host
// memory holds the prompt's prefix loads it over PCIe rather than another computing it; kv,
// Dynamo's cost, sees the device tier only.
TEST(EngineEvents, HostPinnedBlocksSteerKvTopo) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=2");
  ASSERT_TRUE(cluster);
  // Three blocks of 256 tokens and a partial one: long enough that computing them costs more
  // than reading the weights once (a few tokens' prefill is all weight reads, and loading saves nothing).
  auto t = tokens(500, 3 * 256 + 10);
  Json blocks = Json::array();
  for (std::uint32_t k = 0; k < 3; ++k)
    blocks.push_back({{"block_hash", 11 + k}, {"tokens_hash", tokens_block_hash(tokens(500 + 256 * k, 256))}});
  Json host = {{"worker_id", 1}, {"storage_tier", "host_pinned"},
               {"event", {{"data", {{"stored", {{"parent_hash", nullptr}, {"blocks", blocks}}}}}}}};
  for (const char* policy : {"kv-topo", "kv"}) {
    RouteServiceOptions o;
    o.workers = 2;
    o.policy = policy;
    o.block_tokens = 256;
    auto service = RouterService::create(*cluster, o);
    ASSERT_TRUE(service) << service.error().to_string();
    ASSERT_TRUE((*service)->kv_events(host));
    auto r = (*service)->route(Json{{"token_ids", t}});
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ((*r)["tier_overlap_blocks"]["host_pinned"], std::string(policy) == "kv" ? 0 : 3) << policy << " " << r->dump();
    EXPECT_EQ((*r)["worker"], std::string(policy) == "kv" ? 0 : 1) << policy;
    EXPECT_EQ((*r)["host_blocks"], std::string(policy) == "kv" ? 0 : 3) << policy;
    EXPECT_EQ((*r)["overlap_blocks"], 0) << policy;
  }
}

TEST(EngineEvents, WorkerSlotsFillThenRefuse) {
  auto cluster = load_cluster("preset:dgx-h100?nodes=1");
  ASSERT_TRUE(cluster);
  auto service = RouterService::create(*cluster, {"llama3-8b", 2, 1, "kv", 4});
  ASSERT_TRUE(service);
  auto a = (*service)->register_worker(Json{{"worker_id", 1}});
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)["worker"], 1);  // small ids keep their index
  auto b = (*service)->register_worker(Json{{"worker_id", 1ull << 40}});
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)["worker"], 0);
  EXPECT_EQ((*(*service)->register_worker(Json{{"worker_id", 1ull << 40}}))["worker"], 0);  // idempotent
  auto full = (*service)->register_worker(Json{{"worker_id", 9}});
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, ErrorCode::kInfeasible);
}

}  // namespace
}  // namespace toposched::router
