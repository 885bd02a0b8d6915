// The fast path of a JSON reader whose exact reader is yaml-cpp (formats/k8s_nodes.cc's
// NodeList, placement/state_file.cc's allocation state): simdjson On Demand walks the text
// without building a document tree, and declines (throws FastPathDeclines) on anything it
// does not read the way the yaml-cpp path does, which then reads the text again for its
// result or its file:line:col error. These are the checks every such fast path makes: the
// text it may try at all, repeated keys, and the values it skips. Header-only; the
// functions are pure and thread-safe, an ObjectKeys is used by one thread.
#pragma once

#include <string_view>
#include <vector>

#include <simdjson.h>

namespace toposched::json_fast_path {

struct FastPathDeclines {};

constexpr int kFastPathMaxDepth = 400;  // yaml-cpp refuses more than 500 nested collections

// Whether the fast path may try `text` at all: one JSON object, no \u escape (yaml-cpp
// encodes surrogate halves alone), no lone CR (a line break to yaml-cpp's positions).
inline bool fast_path_may_read(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\n\r");
  if (first == std::string_view::npos || text[first] != '{') return false;
  if (text.find("\\u") != std::string_view::npos) return false;
  for (std::size_t cr = text.find('\r'); cr != std::string_view::npos; cr = text.find('\r', cr + 1))
    if (cr + 1 == text.size() || text[cr + 1] != '\n') return false;
  return true;
}

// The keys of one object so far; a repeated one declines (load_yaml_document refuses it).
class ObjectKeys {
 public:
  void add(std::string_view key) {
    if (keys_.size() >= 256) throw FastPathDeclines{};  // the linear check stays cheap
    for (std::string_view k : keys_)
      if (k == key) throw FastPathDeclines{};
    keys_.push_back(key);
  }

 private:
  std::vector<std::string_view> keys_;
};

// A value the reader does not use, walked for what the yaml-cpp path would refuse in it.
inline void check_unused(simdjson::ondemand::value v, int depth) {
  namespace sj = simdjson::ondemand;
  if (depth > kFastPathMaxDepth) throw FastPathDeclines{};
  switch (v.type()) {
    case sj::json_type::object: {
      ObjectKeys keys;
      for (auto field : v.get_object()) {
        keys.add(field.unescaped_key());
        check_unused(field.value(), depth + 1);
      }
      break;
    }
    case sj::json_type::array:
      for (auto item : v.get_array()) check_unused(item.value(), depth + 1);
      break;
    case sj::json_type::string:
      // Unescaped, so a bad escape declines here as yaml-cpp refuses it. Discarding the
      // result would discard its error too (found by the state_file fuzz target).
      if (v.get_string().error()) throw FastPathDeclines{};
      break;
    default:
      break;
  }
}

}  // namespace toposched::json_fast_path
