// Go encoding/json conventions for the Kubernetes extender protocol: the writer that emits
// JSON byte for byte as Go's json.Marshal does (HTML-safe string escapes, U+2028/U+2029
// escaped, invalid UTF-8 replaced by U+FFFD, maps with sorted keys: the caller sorts), and
// the key comparison Go's decoder uses to match a JSON key to a struct field (exact, or
// equal under Unicode simple case folding, which for ASCII field names means ASCII case
// plus U+212A KELVIN SIGN = 'k' and U+017F LONG S = 's', as bytes.EqualFold does).
//
// GoJsonWriter appends to a string it owns; not thread-safe (one per response).
// The free functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "topology/error.h"

namespace toposched::k8s {

// True when Go's decoder would store JSON key `key` in the struct field named `field`
// (an ASCII identifier such as "NodeNames").
bool go_key_matches(std::string_view key, std::string_view field);

class GoJsonWriter {
 public:
  void begin_object() { separate(); out_ += '{'; first_ = true; }
  void end_object() { out_ += '}'; first_ = false; }
  void begin_array() { separate(); out_ += '['; first_ = true; }
  void end_array() { out_ += ']'; first_ = false; }
  // An object key; the value written next belongs to it.
  void key(std::string_view k);
  void string(std::string_view s);
  void int64(std::int64_t v);
  void null();
  void boolean(bool v);
  // Already-encoded JSON (e.g. a node object passed through unchanged).
  void raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }
  void reserve(std::size_t n) { out_.reserve(n); }

 private:
  void separate() {
    if (!first_ && !after_key_) out_ += ',';
    after_key_ = false;
    first_ = false;
  }
  void escape(std::string_view s);

  std::string out_;
  bool first_ = true;
  bool after_key_ = false;
};

}  // namespace toposched::k8s
