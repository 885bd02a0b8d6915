// Strong integer ids for the entities of a Cluster. Ids are dense (0..count-1) so they
// index flat vectors; distinct types keep a NodeId from being passed as a GpuId.
// kInvalid marks "none" (e.g. a node without a leaf switch). Trivially copyable values.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace toposched {

template <class Tag>
struct StrongId {
  static constexpr std::uint32_t kInvalidValue = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t value = kInvalidValue;

  constexpr StrongId() = default;
  constexpr explicit StrongId(std::uint32_t v) : value(v) {}
  constexpr bool valid() const { return value != kInvalidValue; }
  constexpr std::size_t index() const { return value; }
  friend constexpr auto operator<=>(StrongId, StrongId) = default;
};

using NodeId = StrongId<struct NodeTag>;
using GpuId = StrongId<struct GpuTag>;
using SwitchId = StrongId<struct SwitchTag>;
using DomainId = StrongId<struct DomainTag>;
using NodeTypeId = StrongId<struct NodeTypeTag>;

}  // namespace toposched

template <class Tag>
struct std::hash<toposched::StrongId<Tag>> {
  std::size_t operator()(toposched::StrongId<Tag> id) const noexcept {
    return std::hash<std::uint32_t>{}(id.value);
  }
};
