// One libFuzzer target per reader of tests/support/fuzz_readers.h: CMake compiles this file
// once per table entry with TOPOSCHED_FUZZ_READER naming it (fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "support/fuzz_readers.h"

#ifndef TOPOSCHED_FUZZ_READER
#error "TOPOSCHED_FUZZ_READER must name an entry of fuzz_readers()"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const toposched::fuzz::FuzzReader* reader = [] {
    const auto* r = toposched::fuzz::find_fuzz_reader(TOPOSCHED_FUZZ_READER);
    if (!r) {
      std::fprintf(stderr, "no fuzz reader named %s\n", TOPOSCHED_FUZZ_READER);
      std::abort();
    }
    return r;
  }();
  reader->read(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
