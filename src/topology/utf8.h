// UTF-8 well-formedness, shared by the readers (YAML and JSON inputs must be UTF-8 text)
// and the JSON writers (JSON output must be UTF-8). It lives in the lowest layer so that a
// reader in any layer refuses a byte that a writer further on could not write: a state file
// whose job name held a stray 0xff byte was read, and `place` then died writing its answer
// (issue 29, `make mutations`). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace toposched {

// Offset of the first byte of `text` that does not belong to a well-formed UTF-8 sequence
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF); nullopt if valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

}  // namespace toposched
