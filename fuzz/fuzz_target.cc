// The libFuzzer entry point shared by every fuzz target: it runs the reader of
// tests/support/fuzz_readers.h that the target's reader_name.cc names. Compiled once
// (fuzz/CMakeLists.txt); each target adds only its one-line name.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "support/fuzz_readers.h"

extern "C" const char* const toposched_fuzz_reader_name;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const toposched::fuzz::FuzzReader* reader = [] {
    const auto* r = toposched::fuzz::find_fuzz_reader(toposched_fuzz_reader_name);
    if (!r) {
      std::fprintf(stderr, "no fuzz reader named %s\n", toposched_fuzz_reader_name);
      std::abort();
    }
    return r;
  }();
  reader->read(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
