#include "router/kv_events.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>
#include <msgpack.hpp>
#include <xxhash.h>

#include "topology/registry.h"
#include "topology/text.h"

namespace toposched::router {

std::string_view storage_tier_name(StorageTier tier) {
  switch (tier) {
    case StorageTier::kDevice: return "device";
    case StorageTier::kHostPinned: return "host_pinned";
    case StorageTier::kDisk: return "disk";
    case StorageTier::kExternal: return "external";
  }
  return "device";
}

namespace {

// vLLM's and Dynamo's spellings of where a KV block lives (matched in lower case).
const Registry<StorageTier>& storage_tiers() {
  static const Registry<StorageTier> kTiers(
      "storage tier", {{"device", "GPU memory (HBM)", StorageTier::kDevice, {"gpu", "hbm"}},
                       {"host_pinned", "pinned host memory", StorageTier::kHostPinned,
                        {"hostpinned", "host", "cpu", "cpu_tier1"}},
                       {"disk", "local disk", StorageTier::kDisk, {"storage", "cpu_tier2"}},
                       {"external", "outside the node", StorageTier::kExternal}});
  return kTiers;
}

}  // namespace

std::optional<StorageTier> parse_storage_tier(std::string_view name) {
  if (const auto* row = storage_tiers().row(ascii_lower(name))) return row->value;
  return std::nullopt;
}

std::uint64_t tokens_block_hash(std::span<const std::uint32_t> tokens) {
  std::vector<unsigned char> bytes(tokens.size() * 4);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<std::size_t>(b)] = static_cast<unsigned char>(tokens[i] >> (8 * b));
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), kDynamoHashSeed);
}

std::vector<std::uint64_t> token_sequence_hashes(std::span<const std::uint32_t> tokens, int block_tokens) {
  std::vector<std::uint64_t> out;
  if (block_tokens < 1) return out;
  const std::size_t bs = static_cast<std::size_t>(block_tokens);
  for (std::size_t start = 0; start + bs <= tokens.size(); start += bs) {
    std::uint64_t local = tokens_block_hash(tokens.subspan(start, bs));
    out.push_back(out.empty() ? local : chain_hash(out.back(), local));
  }
  return out;
}

std::uint64_t external_hash_from_bytes(std::span<const std::byte> bytes) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), kDynamoHashSeed);
}

namespace {

using Obj = msgpack::object;

tl::unexpected<Error> bad(const std::string& where, std::string what) {
  return make_error(ErrorCode::kParse, fmt::format("{}: {}", where, what));
}

const char* type_name(const Obj& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "float";
    case msgpack::type::STR: return "str";
    case msgpack::type::BIN: return "bytes";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    default: return "ext";
  }
}

std::string_view str_of(const Obj& o) { return {o.via.str.ptr, o.via.str.size}; }

Result<std::uint64_t> block_hash(const Obj& o, const std::string& where) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) return o.via.u64;
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return static_cast<std::uint64_t>(o.via.i64);
  if (o.type == msgpack::type::BIN)
    return external_hash_from_bytes(std::as_bytes(std::span<const char>(o.via.bin.ptr, o.via.bin.size)));
  return bad(where, fmt::format("expected an integer or bytes (a block hash), found {}", type_name(o)));
}

Result<std::optional<std::uint64_t>> optional_hash(const Obj* o, const std::string& where) {
  if (!o || o->type == msgpack::type::NIL) return std::optional<std::uint64_t>{};
  TOPOSCHED_TRY(h, block_hash(*o, where));
  return std::optional<std::uint64_t>(h);
}

Result<std::vector<std::uint64_t>> hash_list(const Obj* o, const std::string& where) {
  if (!o || o->type != msgpack::type::ARRAY) return bad(where, fmt::format("expected an array of block hashes, found {}", o ? type_name(*o) : "nothing"));
  std::vector<std::uint64_t> out;
  out.reserve(o->via.array.size);
  for (std::uint32_t i = 0; i < o->via.array.size; ++i) {
    TOPOSCHED_TRY(h, block_hash(o->via.array.ptr[i], fmt::format("{}[{}]", where, i)));
    out.push_back(h);
  }
  return out;
}

Result<std::vector<std::uint32_t>> token_list(const Obj* o, const std::string& where) {
  if (!o || o->type != msgpack::type::ARRAY) return bad(where, fmt::format("expected an array of token ids, found {}", o ? type_name(*o) : "nothing"));
  std::vector<std::uint32_t> out;
  out.reserve(o->via.array.size);
  for (std::uint32_t i = 0; i < o->via.array.size; ++i) {
    const Obj& t = o->via.array.ptr[i];
    if (t.type != msgpack::type::POSITIVE_INTEGER || t.via.u64 > 0xffffffffu)
      return bad(fmt::format("{}[{}]", where, i), fmt::format("expected a token id (0..2^32-1), found {}", type_name(t)));
    out.push_back(static_cast<std::uint32_t>(t.via.u64));
  }
  return out;
}

Result<int> block_size(const Obj* o, const std::string& where) {
  if (!o || o->type != msgpack::type::POSITIVE_INTEGER || o->via.u64 < 1 || o->via.u64 > (1u << 20))
    return bad(where, fmt::format("expected a block size (1..1048576), found {}", o ? type_name(*o) : "nothing"));
  return static_cast<int>(o->via.u64);
}

std::optional<std::string> optional_str(const Obj* o) {
  if (!o || o->type != msgpack::type::STR) return std::nullopt;
  return std::string(str_of(*o));
}

// The fields of an event by name, whichever encoding it came in. Tagged arrays hold the
// fields in the struct's declaration order after the tag (trailing defaults may be missing).
struct Fields {
  std::string type;
  std::vector<std::pair<std::string_view, const Obj*>> named;
  const Obj* get(std::string_view name) const {
    for (const auto& [n, o] : named)
      if (n == name) return o;
    return nullptr;
  }
};

const std::vector<std::string_view>& positional(std::string_view type) {
  static const std::vector<std::string_view> stored = {"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium"};
  static const std::vector<std::string_view> removed = {"block_hashes", "medium"};
  static const std::vector<std::string_view> none;
  return type == "BlockStored" ? stored : type == "BlockRemoved" ? removed : none;
}

Result<Fields> event_fields(const Obj& e, const std::string& where) {
  Fields f;
  if (e.type == msgpack::type::ARRAY) {
    if (e.via.array.size == 0 || e.via.array.ptr[0].type != msgpack::type::STR)
      return bad(where, "expected a tagged array [\"BlockStored\" | \"BlockRemoved\" | \"AllBlocksCleared\", ...]");
    f.type = std::string(str_of(e.via.array.ptr[0]));
    const auto& names = positional(f.type);
    for (std::uint32_t i = 1; i < e.via.array.size && i - 1 < names.size(); ++i) f.named.emplace_back(names[i - 1], &e.via.array.ptr[i]);
    return f;
  }
  if (e.type == msgpack::type::MAP) {
    for (std::uint32_t i = 0; i < e.via.map.size; ++i) {
      const auto& kv = e.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR) return bad(where, "expected string keys");
      if (str_of(kv.key) == "type" && kv.val.type == msgpack::type::STR) f.type = std::string(str_of(kv.val));
      else f.named.emplace_back(str_of(kv.key), &kv.val);
    }
    if (f.type.empty()) return bad(where, "expected a \"type\" key (BlockStored, BlockRemoved or AllBlocksCleared)");
    return f;
  }
  return bad(where, fmt::format("expected an event (tagged array or map), found {}", type_name(e)));
}

Result<EngineEvent> decode_event(const Obj& e, const std::string& where) {
  TOPOSCHED_TRY(f, event_fields(e, where));
  if (f.type == "BlockStored") {
    EngineBlockStored s;
    TOPOSCHED_TRY(hashes, hash_list(f.get("block_hashes"), where + ".block_hashes"));
    TOPOSCHED_TRY(parent, optional_hash(f.get("parent_block_hash"), where + ".parent_block_hash"));
    TOPOSCHED_TRY(tokens, token_list(f.get("token_ids"), where + ".token_ids"));
    TOPOSCHED_TRY(size, block_size(f.get("block_size"), where + ".block_size"));
    s.block_hashes = std::move(hashes);
    s.parent_hash = parent;
    s.token_ids = std::move(tokens);
    s.block_size = size;
    s.medium = optional_str(f.get("medium"));
    return s;
  }
  if (f.type == "BlockRemoved") {
    EngineBlockRemoved r;
    TOPOSCHED_TRY(hashes, hash_list(f.get("block_hashes"), where + ".block_hashes"));
    r.block_hashes = std::move(hashes);
    r.medium = optional_str(f.get("medium"));
    return r;
  }
  if (f.type == "AllBlocksCleared") return EngineAllCleared{};
  return bad(where, fmt::format("unknown event type '{}' (expected BlockStored, BlockRemoved or AllBlocksCleared)", f.type));
}

// [ts, events, dp_rank?] or {"ts", "events", "data_parallel_rank"?}.
Result<EngineBatch> decode_batch(const Obj& root) {
  const Obj *ts = nullptr, *events = nullptr, *rank = nullptr;
  if (root.type == msgpack::type::ARRAY && root.via.array.size >= 2) {
    ts = &root.via.array.ptr[0];
    events = &root.via.array.ptr[1];
    if (root.via.array.size >= 3) rank = &root.via.array.ptr[2];
  } else if (root.type == msgpack::type::MAP) {
    for (std::uint32_t i = 0; i < root.via.map.size; ++i) {
      const auto& kv = root.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR) continue;
      std::string_view k = str_of(kv.key);
      if (k == "ts") ts = &kv.val;
      else if (k == "events") events = &kv.val;
      else if (k == "data_parallel_rank") rank = &kv.val;
    }
  } else {
    return bad("batch", fmt::format("expected [ts, events, dp_rank] or {{\"ts\", \"events\"}}, found {}", type_name(root)));
  }
  EngineBatch b;
  if (!ts || (ts->type != msgpack::type::FLOAT64 && ts->type != msgpack::type::FLOAT32 && ts->type != msgpack::type::POSITIVE_INTEGER))
    return bad("batch.ts", "expected a timestamp (float)");
  b.ts = ts->type == msgpack::type::POSITIVE_INTEGER ? static_cast<double>(ts->via.u64) : ts->via.f64;
  if (!events || events->type != msgpack::type::ARRAY) return bad("batch.events", "expected an array of events");
  if (rank && rank->type == msgpack::type::POSITIVE_INTEGER) b.dp_rank = static_cast<std::uint32_t>(rank->via.u64);
  for (std::uint32_t i = 0; i < events->via.array.size; ++i) {
    TOPOSCHED_TRY(e, decode_event(events->via.array.ptr[i], fmt::format("events[{}]", i)));
    b.events.push_back(std::move(e));
  }
  return b;
}

}  // namespace

Result<EngineBatch> decode_engine_batch(std::span<const std::byte> payload) {
  try {
    // Bounded: no batch needs more nesting than 6 or more than 16M elements in one array.
    msgpack::unpack_limit limit(1u << 24, 1u << 16, 1u << 20, 1u << 20, 1u << 16, 8);
    msgpack::object_handle oh =
        msgpack::unpack(reinterpret_cast<const char*>(payload.data()), payload.size(), nullptr, nullptr, limit);
    return decode_batch(oh.get());
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("batch: not a msgpack document ({})", e.what()));
  }
}

Result<std::vector<RouterEvent>> engine_batch_to_router_events(const EngineBatch& batch, std::uint64_t worker_id, int block_tokens) {
  std::vector<RouterEvent> out;
  for (std::size_t i = 0; i < batch.events.size(); ++i) {
    RouterEvent r;
    r.worker_id = worker_id;
    r.dp_rank = batch.dp_rank.value_or(0);
    const EngineEvent& e = batch.events[i];
    auto tier_of = [](const std::optional<std::string>& medium) {
      return medium ? parse_storage_tier(*medium).value_or(StorageTier::kDevice) : StorageTier::kDevice;
    };
    if (const auto* s = std::get_if<EngineBlockStored>(&e)) {
      if (s->block_size != block_tokens)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("events[{}]: engine block_size {} differs from the router's {} tokens per block "
                                      "(serve --router-block-tokens)", i, s->block_size, block_tokens));
      const std::size_t bs = static_cast<std::size_t>(s->block_size);
      if (s->token_ids.size() != s->block_hashes.size() * bs)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("events[{}]: {} token_ids for {} blocks of {} tokens (expected {})", i, s->token_ids.size(),
                                      s->block_hashes.size(), bs, s->block_hashes.size() * bs));
      ExternalStored st;
      st.parent_hash = s->parent_hash;
      std::span<const std::uint32_t> tokens(s->token_ids);
      for (std::size_t b = 0; b < s->block_hashes.size(); ++b)
        st.blocks.push_back({s->block_hashes[b], tokens_block_hash(tokens.subspan(b * bs, bs))});
      r.tier = tier_of(s->medium);
      r.data = std::move(st);
    } else if (const auto* rm = std::get_if<EngineBlockRemoved>(&e)) {
      r.tier = tier_of(rm->medium);
      r.data = ExternalRemoved{rm->block_hashes};
    } else {
      r.data = KvCleared{};
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace toposched::router
