#include "k8s/go_json.h"

#include <array>
#include <charconv>

namespace toposched::k8s {

namespace {

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// UTF-8 sequence length starting at s[i] when it is valid (Go's utf8.DecodeRuneInString
// rules: shortest form, no surrogates, <= U+10FFFF), else 0.
std::size_t valid_utf8_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  auto cont = [&](std::size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b0 == 0xED && b1 >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b0 == 0xF0 && b1 < 0x90) return 0;
    if (b0 == 0xF4 && b1 >= 0x90) return 0;
    return 4;
  }
  return 0;
}

}  // namespace

bool go_key_matches(std::string_view key, std::string_view field) {
  std::size_t i = 0, j = 0;
  for (; i < key.size() && j < field.size(); ++j) {
    const char want = ascii_lower(field[j]);
    // Multi-byte runes whose simple fold is an ASCII letter.
    if (key.compare(i, 3, "\xE2\x84\xAA") == 0) {  // U+212A KELVIN SIGN
      if (want != 'k') return false;
      i += 3;
      continue;
    }
    if (key.compare(i, 2, "\xC5\xBF") == 0) {  // U+017F LATIN SMALL LETTER LONG S
      if (want != 's') return false;
      i += 2;
      continue;
    }
    if (ascii_lower(key[i]) != want) return false;
    ++i;
  }
  return i == key.size() && j == field.size();
}

void GoJsonWriter::key(std::string_view k) {
  separate();
  escape(k);
  out_ += ':';
  after_key_ = true;
}

void GoJsonWriter::string(std::string_view s) {
  separate();
  escape(s);
}

void GoJsonWriter::int64(std::int64_t v) {
  separate();
  std::array<char, 24> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  (void)ec;
  out_.append(buf.data(), end);
}

void GoJsonWriter::null() {
  separate();
  out_ += "null";
}

void GoJsonWriter::boolean(bool v) {
  separate();
  out_ += v ? "true" : "false";
}

void GoJsonWriter::raw(std::string_view json) {
  separate();
  out_ += json;
}

// Go's encodeState.string with escapeHTML = true.
void GoJsonWriter::escape(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out_ += '"';
  std::size_t start = 0;
  auto flush = [&](std::size_t i) { out_.append(s.data() + start, i - start); };
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      if (b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&') {
        ++i;
        continue;
      }
      flush(i);
      switch (b) {
        case '\\': out_ += "\\\\"; break;
        case '"': out_ += "\\\""; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        case '\b': out_ += "\\b"; break;  // Go >= 1.22
        case '\f': out_ += "\\f"; break;  // Go >= 1.22
        default:
          out_ += "\\u00";
          out_ += kHex[b >> 4];
          out_ += kHex[b & 0xF];
      }
      start = ++i;
      continue;
    }
    const std::size_t n = valid_utf8_length(s, i);
    if (n == 0) {
      flush(i);
      out_ += "\\ufffd";
      start = ++i;
      continue;
    }
    if (n == 3 && b == 0xE2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) & 0xFE) == 0xA8) {  // U+2028, U+2029
      flush(i);
      out_ += (static_cast<unsigned char>(s[i + 2]) == 0xA8) ? "\\u2028" : "\\u2029";
      start = i + 3;
    }
    i += n;
  }
  flush(s.size());
  out_ += '"';
}

}  // namespace toposched::k8s
