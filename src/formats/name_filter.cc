#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "formats/name_filter.h"

#include <regex>

#include <fmt/format.h>

namespace toposched {

struct NameFilter::Impl {
  std::regex re;
};

Result<NameFilter> NameFilter::compile(const std::string& pattern, std::string_view what) {
  try {
    NameFilter f;
    f.impl_ = std::make_shared<const Impl>(Impl{std::regex(pattern, std::regex::ECMAScript)});
    f.pattern_ = pattern;
    return f;
  } catch (const std::regex_error& e) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: invalid regular expression '{}': {}", what, pattern, e.what()));
  }
}

bool NameFilter::matches(std::string_view name) const {
  if (!impl_) return true;
  try {
    return std::regex_match(name.begin(), name.end(), impl_->re);
  } catch (const std::regex_error&) {
    return false;  // e.g. a pathological expression hitting the complexity limit
  }
}

}  // namespace toposched
