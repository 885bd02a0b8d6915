// The fast path of a JSON reader whose exact reader is yaml-cpp (formats/k8s_nodes.cc's
// NodeList, placement/state_file.cc's allocation state) or nlohmann-json through
// parse_json_document (sim/traces/other_traces.cc's Philly trace): simdjson On Demand walks
// the text without building a document tree, and declines (throws FastPathDeclines) on
// anything it does not read the way the exact path does, which then reads the text again
// for its result or its file:line:col error. These are the checks every such fast path
// makes: the text it may try at all, repeated keys, and the values it skips. Header-only;
// the functions are pure and thread-safe, an ObjectKeys is used by one thread.
#pragma once

#include <string_view>
#include <vector>

#include <simdjson.h>

namespace toposched::json_fast_path {

struct FastPathDeclines {};

constexpr int kFastPathMaxDepth = 400;  // yaml-cpp refuses more than 500 nested collections

constexpr int kFastPathMaxJsonDepth = 100;  // parse_json_document refuses 128 (kMaxJsonDepth)

// Whether a string of `text` ends with a line break before its colon ("key"\n: value). Each
// closing quote is found with memchr and is one unless an odd run of backslashes precedes it.
inline bool line_break_before_a_colon(std::string_view text) {
  std::size_t open = text.find('"');
  while (open != std::string_view::npos) {
    std::size_t close = text.find('"', open + 1);
    for (;;) {
      if (close == std::string_view::npos) return false;  // an open string: simdjson refuses the text
      std::size_t backslashes = 0;
      while (text[close - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) break;
      close = text.find('"', close + 1);
    }
    const std::size_t next = text.find_first_not_of(" \t\r\n", close + 1);
    if (next == std::string_view::npos) return false;
    if (text[next] == ':' && text.substr(close + 1, next - close - 1).find('\n') != std::string_view::npos) return true;
    open = text[next] == '"' ? next : text.find('"', next);
  }
  return false;
}

// The exact reader a fast path stands in for: what it refuses is what the fast path must
// decline on.
enum class ExactReader {
  kYamlCpp,   // load_yaml_document: any scalar is text; at most 500 nested collections
  kNlohmann,  // parse_json_document: JSON numbers and literals only; at most kMaxJsonDepth
};

// Whether the fast path may try `text` at all: one JSON object (or, with `opening` '[',
// one array), no \u escape (yaml-cpp encodes surrogate halves alone; nlohmann and simdjson
// may differ on odd ones), no lone CR (a line break to yaml-cpp's positions), no byte order
// mark (the first byte must be the opening one), and for yaml-cpp no line break between a
// key and its colon (valid JSON; a YAML flow mapping's implicit key must end on its line, so
// yaml-cpp refuses it: found by the k8s_nodes fuzz target).
inline bool fast_path_may_read(std::string_view text, char opening = '{', ExactReader exact = ExactReader::kYamlCpp) {
  const std::size_t first = text.find_first_not_of(" \t\n\r");
  if (first == std::string_view::npos || text[first] != opening) return false;
  if (text.find("\\u") != std::string_view::npos) return false;
  for (std::size_t cr = text.find('\r'); cr != std::string_view::npos; cr = text.find('\r', cr + 1))
    if (cr + 1 == text.size() || text[cr + 1] != '\n') return false;
  return exact != ExactReader::kYamlCpp || !line_break_before_a_colon(text);
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

// Calls fn(key, value) for each field of `object` in order; a repeated key declines.
template <class Fn>
void for_each_field(simdjson::ondemand::value object, Fn fn) {
  ObjectKeys keys;
  for (auto field : object.get_object()) {
    const std::string_view key = field.unescaped_key();
    keys.add(key);
    fn(key, field.value());
  }
}

// A value the reader does not use, walked for what the exact reader would refuse in it: a
// repeated key, a bad escape, too deep a nesting, and for nlohmann also a number or literal
// simdjson cannot read (a leading zero, "1.", "1e400", "tru"), which On Demand otherwise
// skips unread. Unescaped control characters, invalid UTF-8 and bad structure fail
// simdjson's first pass already.
inline void check_unused(simdjson::ondemand::value v, int depth, ExactReader exact = ExactReader::kYamlCpp) {
  namespace sj = simdjson::ondemand;
  const bool json_scalars = exact == ExactReader::kNlohmann;
  if (depth > (json_scalars ? kFastPathMaxJsonDepth : kFastPathMaxDepth)) throw FastPathDeclines{};
  switch (v.type()) {
    case sj::json_type::object:
      for_each_field(v, [&](std::string_view, sj::value field) { check_unused(field, depth + 1, exact); });
      break;
    case sj::json_type::array:
      for (auto item : v.get_array()) check_unused(item.value(), depth + 1, exact);
      break;
    case sj::json_type::string:
      // Unescaped, so a bad escape declines here as yaml-cpp refuses it. Discarding the
      // result would discard its error too (found by the state_file fuzz target).
      if (v.get_string().error()) throw FastPathDeclines{};
      break;
    case sj::json_type::number:
      // get_double reads every valid JSON number, integers past 64 bits included, as nlohmann does.
      if (json_scalars && v.get_double().error()) throw FastPathDeclines{};
      break;
    case sj::json_type::boolean:
      if (json_scalars && v.get_bool().error()) throw FastPathDeclines{};
      break;
    case sj::json_type::null:
      if (json_scalars) {
        auto null = v.is_null();
        if (null.error() || !null.value_unsafe()) throw FastPathDeclines{};
      }
      break;
  }
}

}  // namespace toposched::json_fast_path
