// write_report_dir: the report folder that `simulate`, `route` and `scale` write (one
// routine for the three): created with its parents, report.html (and extra files such as
// simulate's jobs.csv) then report.json, nothing
// left half-written, and a folder that cannot be one refused before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "topology/file_io.h"

namespace toposched {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ReportDir : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("toposched-report-dir-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(ReportDir, CreatesTheFolderWithItsParentsAndWritesBothFiles) {
  const fs::path dir = root_ / "a" / "b";
  ASSERT_TRUE(write_report_dir(dir.string() + "/", "{\"x\": 1}\n", "<html></html>\n"));
  EXPECT_EQ(slurp(dir / "report.json"), "{\"x\": 1}\n");
  EXPECT_EQ(slurp(dir / "report.html"), "<html></html>\n");
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 2);  // no temporary file left beside them
}

TEST_F(ReportDir, ReplacesAnEarlierReport) {
  ASSERT_TRUE(write_report_dir(root_.string(), "old json", "old html"));
  ASSERT_TRUE(write_report_dir(root_.string(), "new json", "new html"));
  EXPECT_EQ(slurp(root_ / "report.json"), "new json");
  EXPECT_EQ(slurp(root_ / "report.html"), "new html");
}

TEST_F(ReportDir, AFileWhereTheFolderShouldBeIsRefusedAndKept) {
  const fs::path not_dir = root_ / "report";
  std::ofstream(not_dir) << "keep";
  auto r = write_report_dir(not_dir.string(), "{}", "<html>");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_NE(r.error().message.find("not a folder"), std::string::npos) << r.error().message;
  EXPECT_EQ(slurp(not_dir), "keep");
}

TEST_F(ReportDir, WhenReportJsonCannotBeWrittenNoNewHtmlIsLeft) {
  // report.json is a directory: write_file_atomically refuses it, after report.html was written.
  fs::create_directories(root_ / "report.json");
  auto r = write_report_dir(root_.string(), "{}", "<html>");
  ASSERT_FALSE(r);
  EXPECT_FALSE(fs::exists(root_ / "report.html"));
  EXPECT_TRUE(fs::is_directory(root_ / "report.json"));
}

TEST_F(ReportDir, ExtraFilesAreWrittenBeforeReportJsonAndRemovedWithIt) {
  const ReportFile extra[] = {{"jobs.csv", "a,b\n"}};
  ASSERT_TRUE(write_report_dir(root_.string(), "{}", "<html>", extra));
  EXPECT_EQ(slurp(root_ / "jobs.csv"), "a,b\n");
  fs::remove_all(root_);
  fs::create_directories(root_ / "report.json");
  auto r = write_report_dir(root_.string(), "{}", "<html>", extra);
  ASSERT_FALSE(r);
  EXPECT_FALSE(fs::exists(root_ / "report.html"));
  EXPECT_FALSE(fs::exists(root_ / "jobs.csv"));
}

TEST_F(ReportDir, AnExtraFileThatCannotBeWrittenLeavesNoReport) {
  fs::create_directories(root_ / "jobs.csv");
  const ReportFile extra[] = {{"jobs.csv", "a,b\n"}};
  auto r = write_report_dir(root_.string(), "{}", "<html>", extra);
  ASSERT_FALSE(r);
  EXPECT_FALSE(fs::exists(root_ / "report.html"));
  EXPECT_FALSE(fs::exists(root_ / "report.json"));
}

}  // namespace
}  // namespace toposched
