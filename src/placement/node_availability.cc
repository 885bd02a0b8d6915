#include "placement/node_availability.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/json_output.h"

namespace toposched {

namespace {
Error invalid(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message), {}}; }

// Sources are keys (a store row, an etcd key part, a metrics-friendly word): a short word.
Result<void> check_source(std::string_view source) {
  const bool word = !source.empty() && source.size() <= 63 && std::all_of(source.begin(), source.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
  if (!word)
    return tl::unexpected(invalid(fmt::format(
        "'source' must be 1-63 characters of a-z, 0-9, '.', '_' or '-' (such as \"k8s\" or \"slurm\"), found \"{}\"",
        source)));
  return {};
}

Result<void> check_reason(const NodeAvailabilityChange& change) {
  if (change.available) {
    if (!change.reason.empty())
      return tl::unexpected(invalid("'reason' is only for \"available\": false (a mark is lifted without one)"));
    return {};
  }
  if (change.reason.empty())
    return tl::unexpected(invalid("\"available\": false needs a 'reason' (such as \"cordoned\" or \"maintenance\")"));
  if (change.reason.size() > kMaxReasonBytes)
    return tl::unexpected(
        invalid(fmt::format("'reason' holds {} bytes; at most {}", change.reason.size(), kMaxReasonBytes)));
  if (first_invalid_utf8(change.reason))
    return tl::unexpected(invalid("'reason' is not valid UTF-8"));
  if (std::any_of(change.reason.begin(), change.reason.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    return tl::unexpected(invalid("'reason' holds a control character (a newline, a tab); give one line of text"));
  return {};
}

// The value of `key` as a string, or kInvalidArgument naming the key and what was found.
Result<std::string> string_value(const nlohmann::json& body, std::string_view key) {
  const nlohmann::json& v = body.at(std::string(key));
  if (!v.is_string()) return tl::unexpected(invalid(fmt::format("'{}' must be a string, found {}", key, v.type_name())));
  return v.get<std::string>();
}
}  // namespace

Result<NodeAvailabilityChange> node_availability_from_json(std::string node, const nlohmann::json& body) {
  if (!body.is_object())
    return tl::unexpected(invalid(fmt::format(
        "expected a JSON object such as {{\"available\": false, \"reason\": \"maintenance\"}}, found {}",
        body.type_name())));
  for (const auto& [key, value] : body.items())
    if (key != "available" && key != "reason" && key != "source")
      return tl::unexpected(invalid(fmt::format("unknown key '{}'; known keys: available, reason, source", key)));
  if (!body.contains("available")) return tl::unexpected(invalid("'available' (true or false) is required"));
  if (!body["available"].is_boolean())
    return tl::unexpected(
        invalid(fmt::format("'available' must be true or false, found {}", body["available"].type_name())));
  NodeAvailabilityChange change;
  change.node = std::move(node);
  change.available = body["available"].get<bool>();
  change.source = std::string(kApiSource);
  if (body.contains("source")) {
    TOPOSCHED_TRY(source, string_value(body, "source"));
    change.source = std::move(source);
  }
  if (body.contains("reason")) {
    TOPOSCHED_TRY(reason, string_value(body, "reason"));
    change.reason = std::move(reason);
  }
  TOPOSCHED_CHECK(check_source(change.source));
  TOPOSCHED_CHECK(check_reason(change));
  return change;
}

Result<NodeId> check_node_availability_change(const Cluster& cluster, const NodeAvailabilityChange& change) {
  auto node = cluster.find_node(change.node);
  if (!node)
    return make_error(ErrorCode::kNotFound, fmt::format("no node named '{}' in cluster '{}'", change.node, cluster.name()));
  TOPOSCHED_CHECK(check_source(change.source));
  TOPOSCHED_CHECK(check_reason(change));
  return *node;
}

const NodeMark* NodeAvailability::mark(NodeId n, std::string_view source) const {
  for (const NodeMark& m : marks_[n.index()])
    if (m.source == source) return &m;
  return nullptr;
}

void NodeAvailability::set(NodeId n, std::string_view source, const std::optional<NodeMark>& mark) {
  std::vector<NodeMark>& marks = marks_[n.index()];
  const bool was_available = marks.empty();
  auto it = std::lower_bound(marks.begin(), marks.end(), source,
                             [](const NodeMark& m, std::string_view s) { return m.source < s; });
  const bool present = it != marks.end() && it->source == source;
  if (mark && present) {
    *it = *mark;
  } else if (mark) {
    marks.insert(it, *mark);
  } else if (present) {
    marks.erase(it);
  }
  if (was_available && !marks.empty()) ++unavailable_;
  if (!was_available && marks.empty()) --unavailable_;
}

std::string NodeAvailability::reasons(NodeId n) const {
  std::string out;
  for (const NodeMark& m : marks_[n.index()]) out += fmt::format("{}{}: {}", out.empty() ? "" : "; ", m.source, m.reason);
  return out;
}

NodeMask NodeAvailability::narrow(const NodeMask& allowed, std::string_view ignored_source) const {
  if (unavailable_ == 0) return allowed;
  NodeMask out = allowed.empty() ? NodeMask(marks_.size(), 1) : allowed;
  bool narrowed = false;
  for (std::size_t i = 0; i < marks_.size() && i < out.size(); ++i) {
    if (!out[i]) continue;
    const auto& marks = marks_[i];
    const bool blocks = std::any_of(marks.begin(), marks.end(),
                                    [&](const NodeMark& m) { return m.source != ignored_source; });
    if (blocks) {
      out[i] = 0;
      narrowed = true;
    }
  }
  return narrowed ? out : allowed;
}

}  // namespace toposched
