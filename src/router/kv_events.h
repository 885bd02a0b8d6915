// KV events as engines and Dynamo send them, before the router translates them into its own
// block names (KvIndex's chained sequence hashes):
//
//  - RouterEvent: Dynamo's JSON (lib/kv-router protocols.rs): {"worker_id": u64, "storage_tier"?:
//    "device" | "host_pinned" | "disk" | "external", "event": {"event_id": u64, "dp_rank"?: u32,
//    "data": {"stored": {"parent_hash": h|null, "blocks": [{"block_hash", "tokens_hash"}]}} |
//    {"removed": {"block_hashes": [...]}} | "cleared"}}. `block_hash` is the engine's name of a
//    block (an opaque chained hash); `tokens_hash` is Dynamo's hash of the block's tokens
//    (XXH3-64, seed 1337, token ids as u32 little-endian), which Dynamo's indexer matches on.
//  - EngineBatch: what vLLM's and SGLang's ZMQ publishers send (vllm/distributed/kv_events.py:
//    EventBatch [ts, events, data_parallel_rank], events BlockStored / BlockRemoved /
//    AllBlocksCleared), decoded from msgpack in both encodings: tagged arrays
//    (["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
//    ...], older releases, array_like structs) and maps with a "type" key (newer releases).
//    Engine block hashes come as uint64, int64 or bytes (vLLM's sha256 hashes, 32 bytes);
//    every form is reduced to one u64 name (external_hash_*), used only to match later
//    Removed events and parents: the router names blocks by their tokens, as Dynamo does.
//
// Functions are pure and reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "router/kv_index.h"

namespace toposched::router {

// Where a cached block lives: Dynamo's StorageTier (vLLM's `medium`: GPU, CPU, CPU_TIER1, ...).
enum class StorageTier { kDevice, kHostPinned, kDisk, kExternal };
inline constexpr int kStorageTiers = 4;
std::string_view storage_tier_name(StorageTier tier);  // "device", "host_pinned", "disk", "external"
// Dynamo's names and vLLM's media, case-insensitive; nullopt when unknown.
std::optional<StorageTier> parse_storage_tier(std::string_view name);

struct ExternalBlock {
  std::uint64_t block_hash = 0;                // the engine's name of the block
  std::optional<std::uint64_t> tokens_hash;    // Dynamo's hash of its tokens, when known
};
struct ExternalStored {
  std::optional<std::uint64_t> parent_hash;    // engine name of the block before the first
  std::vector<ExternalBlock> blocks;
};
struct ExternalRemoved {
  std::vector<std::uint64_t> block_hashes;
};
using ExternalEventData = std::variant<ExternalStored, ExternalRemoved, KvCleared>;

struct RouterEvent {
  std::uint64_t worker_id = 0;
  std::uint32_t dp_rank = 0;
  StorageTier tier = StorageTier::kDevice;
  std::uint64_t event_id = 0;
  ExternalEventData data;
};

// Dynamo's hash of one block's tokens: XXH3-64, seed 1337, over the ids as u32 little-endian.
std::uint64_t tokens_block_hash(std::span<const std::uint32_t> tokens);
// Dynamo's chained sequence hashes of a token sequence: one per full block of `block_tokens`
// (a trailing partial block is not hashed, as Dynamo's compute_block_hash_for_seq).
std::vector<std::uint64_t> token_sequence_hashes(std::span<const std::uint32_t> tokens, int block_tokens);

// The u64 name of an engine block hash: the value itself for uint64, its bits for int64,
// XXH3-64 (seed 1337) of the bytes for a binary hash.
std::uint64_t external_hash_from_bytes(std::span<const std::byte> bytes);

struct EngineBlockStored {
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::uint64_t> parent_hash;
  std::vector<std::uint32_t> token_ids;
  int block_size = 0;
  std::optional<std::string> medium;
};
struct EngineBlockRemoved {
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::string> medium;
};
struct EngineAllCleared {};
using EngineEvent = std::variant<EngineBlockStored, EngineBlockRemoved, EngineAllCleared>;

struct EngineBatch {
  double ts = 0;
  std::vector<EngineEvent> events;
  std::optional<std::uint32_t> dp_rank;
};

// Decodes one msgpack payload (the third frame of a vLLM/SGLang publisher message). Errors:
// kParse naming the path of what is wrong ("events[2].block_hashes[0]: expected an integer
// or bytes, found str"). Unknown event types are an error, unknown map keys are ignored.
Result<EngineBatch> decode_engine_batch(std::span<const std::byte> payload);

// The events of a batch as RouterEvents of one worker: BlockStored's tokens hashed per
// block Dynamo's way (token_ids must hold block_size tokens per block hash). Errors:
// kInvalidArgument when the engine's block size differs from the router's (`block_tokens`)
// or token_ids does not fill the blocks.
Result<std::vector<RouterEvent>> engine_batch_to_router_events(const EngineBatch& batch, std::uint64_t worker_id,
                                                               int block_tokens);

}  // namespace toposched::router
