// Comma-separated option values (`--policies a,b,c`) split into their non-empty items, in
// order. Shared by the commands that take such lists (simulate, route, scale); a header of
// its own so that adding it does not rebuild every command. Pure; thread-safe.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace toposched::cli {

inline std::vector<std::string> split_comma_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace toposched::cli
