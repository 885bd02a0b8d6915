// Registry<T>: a table of things chosen by name (export formats, presets, placement and
// routing policies, stores, trace formats, workload classes, queue disciplines, collectives,
// cluster readers). Each row is a name, a one-line description (for --help and docs) and a
// value. One lookup and one error for every choose-by-name place:
//   find("x") -> the value, or kInvalidArgument "unknown KIND 'x'; known: a, b, c"
// and names() for --help, docs and completions. Rows keep their order (the order --help
// lists them in); aliases are accepted by find but not listed. Invariant: no name or alias
// appears twice (checked when the registry is built; a duplicate is a programming error and
// aborts). Immutable after construction: every method is const and safe from many threads.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topology/error.h"

namespace toposched {

template <class T>
class Registry {
 public:
  struct Row {
    Row(std::string name_, std::string description_, T value_, std::vector<std::string> aliases_ = {})
        : name(std::move(name_)), description(std::move(description_)), value(std::move(value_)),
          aliases(std::move(aliases_)) {}
    std::string name;
    std::string description;
    T value;
    std::vector<std::string> aliases;  // other spellings find accepts
  };

  // `kind` names what the rows are, as the error says it: "export format", "preset".
  Registry(std::string kind, std::vector<Row> rows) : kind_(std::move(kind)), rows_(std::move(rows)) {
    std::vector<std::string_view> seen;
    for (const Row& r : rows_) {
      seen.push_back(r.name);
      for (const auto& a : r.aliases) seen.push_back(a);
    }
    for (std::size_t i = 0; i < seen.size(); ++i)
      for (std::size_t k = 0; k < i; ++k)
        if (seen[i] == seen[k]) {
          std::fprintf(stderr, "toposched: internal error: %s '%.*s' is registered twice\n", kind_.c_str(),
                       static_cast<int>(seen[i].size()), seen[i].data());
          std::abort();
        }
  }

  const std::string& kind() const { return kind_; }
  const std::vector<Row>& rows() const { return rows_; }

  // The row named (or aliased) `name`, or nullptr.
  const Row* row(std::string_view name) const {
    for (const Row& r : rows_) {
      if (r.name == name) return &r;
      for (const auto& a : r.aliases)
        if (a == name) return &r;
    }
    return nullptr;
  }

  bool contains(std::string_view name) const { return row(name) != nullptr; }

  // The value named `name`, or the registry's one error.
  Result<T> find(std::string_view name) const {
    if (const Row* r = row(name)) return r->value;
    return tl::unexpected(unknown(name));
  }

  // "unknown KIND 'name'; known: a, b, c" (kInvalidArgument).
  Error unknown(std::string_view name) const {
    return Error{ErrorCode::kInvalidArgument,
                 "unknown " + kind_ + " '" + std::string(name) + "'; known: " + joined_names(), {}};
  }

  // The names in row order (aliases left out).
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(rows_.size());
    for (const Row& r : rows_) out.push_back(r.name);
    return out;
  }

  // The names in row order, separated by `sep`.
  std::string joined_names(std::string_view sep = ", ") const {
    std::string out;
    for (const Row& r : rows_) {
      if (!out.empty()) out += sep;
      out += r.name;
    }
    return out;
  }

 private:
  std::string kind_;
  std::vector<Row> rows_;
};

}  // namespace toposched
