#include "topology/yaml_input.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "topology/yaml_document.h"

namespace toposched {

Result<YAML::Node> YamlInput::parse(std::string_view text) const { return load_yaml_document(text, file_); }

SourceLocation YamlInput::where(const YAML::Node& node) const { return location_of(node.Mark(), file_); }

tl::unexpected<Error> YamlInput::error_at(const YAML::Node& node, std::string message) const {
  return make_error(ErrorCode::kParse, std::move(message), where(node));
}

std::string YamlInput::describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Scalar: {
      std::string s = node.Scalar();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return fmt::format("'{}'", s);
    }
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "nothing";
  }
}

Result<void> YamlInput::expect_map(const YAML::Node& map, std::string_view what,
                                   const std::set<std::string, std::less<>>& allowed) const {
  if (!map.IsMap()) return error_at(map, fmt::format("expected {} (a mapping), found {}", what, describe(map)));
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->first.IsScalar()) return error_at(it->first, fmt::format("expected a key in {}", what));
    const std::string& key = it->first.Scalar();
    if (!allowed.contains(key)) {
      std::string keys;
      for (const auto& k : allowed) keys += (keys.empty() ? "" : ", ") + k;
      return error_at(it->first, fmt::format("unknown key '{}' in {}; expected one of: {}", key, what, keys));
    }
  }
  return {};
}

Result<void> YamlInput::expect_sequence(const YAML::Node& node, std::string_view what) const {
  if (!node.IsSequence()) return error_at(node, fmt::format("expected {} (a list), found {}", what, describe(node)));
  return {};
}

Result<std::string> YamlInput::string(const YAML::Node& node, std::string_view key) const {
  if (!node.IsScalar())
    return error_at(node, fmt::format("expected '{}' to be a string, found {}", key, describe(node)));
  return node.Scalar();
}

Result<double> YamlInput::number(const YAML::Node& node, std::string_view key) const {
  if (!node.IsScalar())
    return error_at(node, fmt::format("expected '{}' to be a number, found {}", key, describe(node)));
  const std::string& s = node.Scalar();
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v))
    return error_at(node, fmt::format("expected '{}' to be a number, found '{}'", key, s));
  return v;
}

Result<long> YamlInput::integer(const YAML::Node& node, std::string_view key) const {
  if (!node.IsScalar())
    return error_at(node, fmt::format("expected '{}' to be an integer, found {}", key, describe(node)));
  const std::string& s = node.Scalar();
  long v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size())
    return error_at(node, fmt::format("expected '{}' to be an integer, found '{}'", key, s));
  return v;
}

Result<bool> YamlInput::boolean(const YAML::Node& node, std::string_view key) const {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "True" || s == "yes") return true;
    if (s == "false" || s == "False" || s == "no") return false;
  }
  return error_at(node, fmt::format("expected '{}' to be true or false, found {}", key, describe(node)));
}

Result<double> YamlInput::number(const YAML::Node& node, std::string_view key, double lo, double hi) const {
  TOPOSCHED_TRY(v, number(node, key));
  if (v < lo || v > hi) return error_at(node, fmt::format("expected '{}' in {}..{}, found {}", key, lo, hi, node.Scalar()));
  return v;
}

Result<long> YamlInput::whole_number(const YAML::Node& node, std::string_view key, long lo, long hi) const {
  TOPOSCHED_TRY(v, number(node, key, static_cast<double>(lo), static_cast<double>(hi)));
  if (v != std::floor(v)) return error_at(node, fmt::format("expected '{}' to be a whole number, found {}", key, node.Scalar()));
  return static_cast<long>(v);
}

Result<std::size_t> YamlInput::choice(const YAML::Node& node, std::string_view key,
                                      std::initializer_list<std::string_view> options) const {
  if (node.IsScalar()) {
    std::size_t i = 0;
    for (std::string_view option : options) {
      if (node.Scalar() == option) return i;
      ++i;
    }
  }
  std::string list;
  for (std::string_view option : options) list += (list.empty() ? "" : ", ") + std::string(option);
  return error_at(node, fmt::format("expected '{}' to be one of {}, found {}", key, list, describe(node)));
}

Result<std::vector<std::string>> YamlInput::words(const YAML::Node& node, std::string_view key) const {
  std::vector<std::string> out;
  if (node.IsScalar()) {
    std::istringstream ss(node.Scalar());
    std::string w;
    while (ss >> w) out.push_back(w);
    return out;
  }
  if (node.IsSequence()) {
    for (const auto& item : node) {
      auto s = string(item, key);
      if (!s) return tl::unexpected(s.error());
      out.push_back(*s);
    }
    return out;
  }
  return error_at(node, fmt::format("expected '{}' to be a list or a string of words, found {}", key, describe(node)));
}

namespace {

// map[key] read by `read` when present, nullopt when absent.
template <class T, class Read>
Result<std::optional<T>> when_present(const YAML::Node& map, std::string_view key, Read read) {
  const YAML::Node n = map[std::string(key)];
  if (!n) return std::optional<T>();
  TOPOSCHED_TRY(v, read(n));
  return std::optional<T>(std::move(v));
}

}  // namespace

Result<std::optional<std::string>> YamlInput::opt_string(const YAML::Node& map, std::string_view key) const {
  return when_present<std::string>(map, key, [&](const YAML::Node& n) { return string(n, key); });
}

Result<std::optional<double>> YamlInput::opt_number(const YAML::Node& map, std::string_view key) const {
  return when_present<double>(map, key, [&](const YAML::Node& n) { return number(n, key); });
}

Result<std::optional<long>> YamlInput::opt_integer(const YAML::Node& map, std::string_view key) const {
  return when_present<long>(map, key, [&](const YAML::Node& n) { return integer(n, key); });
}

Result<std::optional<bool>> YamlInput::opt_boolean(const YAML::Node& map, std::string_view key) const {
  return when_present<bool>(map, key, [&](const YAML::Node& n) { return boolean(n, key); });
}

Result<std::string> YamlInput::req_string(const YAML::Node& map, std::string_view key) const {
  YAML::Node n = map[std::string(key)];
  if (!n) return error_at(map, fmt::format("missing required key '{}'", key));
  return string(n, key);
}

}  // namespace toposched
