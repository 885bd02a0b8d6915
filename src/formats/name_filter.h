// NameFilter: a user-given regular expression (ECMAScript) that must match a whole name,
// e.g. `--hca 'mlx5_[0-7]'`. Wraps std::regex so that only one translation unit
// instantiates it (g++ 12 reports false "maybe-uninitialized" warnings inside <regex>
// under the sanitizer build). Immutable after compile(); matches() is safe from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "topology/error.h"

namespace toposched {

class NameFilter {
 public:
  // kInvalidArgument naming `what` (e.g. "--hca") when the expression does not compile.
  static Result<NameFilter> compile(const std::string& pattern, std::string_view what);
  bool matches(std::string_view name) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  std::string pattern_;
};

}  // namespace toposched
