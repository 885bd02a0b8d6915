// Replays tests/data/fuzz-regressions/ (every input that ever crashed a reader or a fuzz
// target, kept forever) through every reader of the fuzz table under this build's
// sanitizers, and the seed fixtures of tests/data/ too: none may crash, throw or hang.
#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/fuzz_readers.h"

namespace toposched::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "README.md") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Feeds each file to each reader; an exception is a failure (a crash ends the binary).
void replay(const std::vector<fs::path>& files) {
  for (const fs::path& f : files) {
    const std::string bytes = bytes_of(f);
    for (const FuzzReader& r : fuzz_readers()) {
      SCOPED_TRACE(f.string() + " through " + std::string(r.name));
      try {
        r.read(bytes);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "exception escaped the reader: " << e.what();
      } catch (...) {
        ADD_FAILURE() << "exception of unknown type escaped the reader";
      }
    }
  }
}

TEST(FuzzRegressions, EveryKeptInputThroughEveryReader) {
  auto files = files_under(fs::path(TOPOSCHED_TEST_DATA) / "fuzz-regressions");
  ASSERT_FALSE(files.empty()) << "tests/data/fuzz-regressions/ holds the inputs that once crashed";
  replay(files);
}

TEST(FuzzRegressions, SeedFixturesThroughEveryReader) {
  // The fuzzers' seeds are valid inputs of one reader; every other reader must refuse them
  // cleanly (and the matching one accept them), whatever their size.
  std::vector<fs::path> files;
  for (const char* dir : {"discovery", "nvidia-smi", "traces", "fuzz-seeds"})
    for (auto& p : files_under(fs::path(TOPOSCHED_TEST_DATA) / dir))
      if (fs::file_size(p) <= (1u << 20)) files.push_back(p);
  ASSERT_GT(files.size(), 20u);
  replay(files);
}

TEST(FuzzReaders, TableNamesAreUniqueAndFindable) {
  for (const FuzzReader& r : fuzz_readers()) EXPECT_EQ(find_fuzz_reader(r.name), &r) << r.name;
  EXPECT_EQ(find_fuzz_reader("no-such-reader"), nullptr);
}

}  // namespace
}  // namespace toposched::fuzz
