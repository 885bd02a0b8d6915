// path_in_dir: the path of a file a command writes into a folder (--report DIR), with one
// separator whatever the folder's name ends with (issue 23: `--report out//` printed
// `out//report.html`).
#include <gtest/gtest.h>

#include "topology/file_io.h"

namespace toposched {
namespace {

TEST(PathInDir, OneSeparatorWhateverTheFolderEndsWith) {
  EXPECT_EQ(path_in_dir("out", "report.html"), "out/report.html");
  EXPECT_EQ(path_in_dir("out/", "report.html"), "out/report.html");
  EXPECT_EQ(path_in_dir("out//", "report.json"), "out/report.json");
  EXPECT_EQ(path_in_dir("a/b///", "report.json"), "a/b/report.json");
  EXPECT_EQ(path_in_dir("./out", "report.html"), "./out/report.html");
}

TEST(PathInDir, RootAndEmptyFolder) {
  EXPECT_EQ(path_in_dir("/", "report.html"), "/report.html");
  EXPECT_EQ(path_in_dir("//", "report.html"), "/report.html");
  EXPECT_EQ(path_in_dir("", "report.html"), "report.html");
}

}  // namespace
}  // namespace toposched
