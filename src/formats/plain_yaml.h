// Helpers of the hand-written fast paths that read a plain subset of YAML line by line
// (formats/topograph_fast.h, formats/native_spec_fast.h): what they accept is read by
// yaml-cpp exactly as they read it, and anything else makes them return false, so the
// caller leaves the file to yaml-cpp. Plain names are of [A-Za-z0-9._-], start with a letter
// or digit and are not `null`; quoted text is double-quoted with no escape. Pure functions
// over views of the caller's text; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace toposched::plain_yaml {

inline constexpr std::size_t kNone = std::string_view::npos;

// Text a fast path may read at all: well-formed UTF-8 without a byte order mark. The
// general reader refuses any other byte wherever it is, comments included
// (topology/yaml_document.h), and a mark changes how yaml-cpp reads the first line.
bool plain_text(std::string_view text);
// A plain scalar yaml-cpp reads as this very string.
bool plain_name(std::string_view s);
// A name or a hostlist ("n[01-04],m1"): a plain one (block context only) starts with a
// letter or digit; a quoted one (the text between the quotes) may start with anything.
bool hostlist_text(std::string_view s, bool quoted);
// False for a line holding bytes the fast paths leave to yaml-cpp wherever they are:
// controls (tabs, CR), non-ASCII, and the indicators of comments, anchors, aliases, tags,
// block scalars, directives, escapes, single quotes and complex keys.
bool plain_line(std::string_view c);
std::string_view trim_spaces(std::string_view s);
// "KEY: VALUE" or "KEY:" with a plain KEY (VALUE trimmed); false for anything else.
bool split_key(std::string_view c, std::string_view& key, std::string_view& value);
// A plain scalar, or a double-quoted one (`quoted`, the text between the quotes), taking
// the whole of `value`; false for anything else.
bool scalar(std::string_view value, std::string_view& text, bool& quoted);

// A one-line flow list `[a, "b", ...]`: item(text, quoted) for each item, in order.
template <class Item>
bool flow_list(std::string_view value, Item item);

// A one-line flow map `{k: v, k: "w", l: [a, b]}` of plain keys: item(key, text, quoted)
// for each entry, in order (values: plain scalars without flow indicators, double-quoted,
// or a flow list passed as it is written, starting with '[').
template <class Item>
bool flow_map(std::string_view value, Item item);

// ---- templates

// Splits the inside of a flow collection at its commas (outside quotes and nested lists);
// piece(text) for each trimmed piece. False on an unclosed quote or list, or an empty piece
// (a trailing comma).
template <class Piece>
bool flow_pieces(std::string_view body, Piece piece) {
  if (trim_spaces(body).empty()) return true;
  std::size_t start = 0, i = 0;
  bool in_quotes = false;
  int depth = 0;
  for (; i <= body.size(); ++i) {
    if (i < body.size() && body[i] == '"') in_quotes = !in_quotes;
    if (i < body.size() && !in_quotes && body[i] == '[') ++depth;
    if (i < body.size() && !in_quotes && body[i] == ']' && --depth < 0) return false;
    if (i < body.size() && (in_quotes || depth > 0 || body[i] != ',')) continue;
    if (depth != 0) return false;
    const std::string_view p = trim_spaces(body.substr(start, i - start));
    if (p.empty() || !piece(p)) return false;
    start = i + 1;
  }
  return !in_quotes;
}

template <class Item>
bool flow_list(std::string_view value, Item item) {
  if (value.size() < 2 || value.front() != '[' || value.back() != ']') return false;
  return flow_pieces(value.substr(1, value.size() - 2), [&](std::string_view p) {
    std::string_view text;
    bool quoted = false;
    return scalar(p, text, quoted) && item(text, quoted);
  });
}

template <class Item>
bool flow_map(std::string_view value, Item item) {
  if (value.size() < 2 || value.front() != '{' || value.back() != '}') return false;
  return flow_pieces(value.substr(1, value.size() - 2), [&](std::string_view p) {
    std::string_view key, v, text;
    bool quoted = false;
    if (!split_key(p, key, v)) return false;
    if (v.starts_with('[')) return item(key, v, false);
    return scalar(v, text, quoted) && item(key, text, quoted);
  });
}

}  // namespace toposched::plain_yaml
