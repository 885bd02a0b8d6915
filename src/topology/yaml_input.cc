#include "formats/yaml_input.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "topology/yaml_document.h"

namespace toposched {

Result<YAML::Node> YamlInput::parse(std::string_view text) const { return load_yaml_document(text, file_); }

SourceLocation YamlInput::where(const YAML::Node& node) const {
  YAML::Mark m = node.Mark();
  if (m.is_null() || m.line < 0) return SourceLocation{file_, 0, 0};
  return SourceLocation{file_, m.line + 1, m.column + 1};
}

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

Result<std::optional<std::string>> YamlInput::opt_string(const YAML::Node& map, std::string_view key) const {
  YAML::Node n = map[std::string(key)];
  if (!n) return std::optional<std::string>();
  auto v = string(n, key);
  if (!v) return tl::unexpected(v.error());
  return std::optional<std::string>(*v);
}

Result<std::optional<double>> YamlInput::opt_number(const YAML::Node& map, std::string_view key) const {
  YAML::Node n = map[std::string(key)];
  if (!n) return std::optional<double>();
  auto v = number(n, key);
  if (!v) return tl::unexpected(v.error());
  return std::optional<double>(*v);
}

Result<std::optional<long>> YamlInput::opt_integer(const YAML::Node& map, std::string_view key) const {
  YAML::Node n = map[std::string(key)];
  if (!n) return std::optional<long>();
  auto v = integer(n, key);
  if (!v) return tl::unexpected(v.error());
  return std::optional<long>(*v);
}

Result<std::optional<bool>> YamlInput::opt_boolean(const YAML::Node& map, std::string_view key) const {
  YAML::Node n = map[std::string(key)];
  if (!n) return std::optional<bool>();
  auto v = boolean(n, key);
  if (!v) return tl::unexpected(v.error());
  return std::optional<bool>(*v);
}

Result<std::string> YamlInput::req_string(const YAML::Node& map, std::string_view key) const {
  YAML::Node n = map[std::string(key)];
  if (!n) return error_at(map, fmt::format("missing required key '{}'", key));
  return string(n, key);
}

}  // namespace toposched
