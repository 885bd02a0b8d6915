// load_yaml_document (one document, no repeated key) and the temporary-file registry that
// the SIGINT/SIGTERM handler of topology/file_io cleans up.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "topology/file_io.h"
#include "topology/yaml_document.h"

namespace toposched {
namespace {

TEST(YamlDocument, RepeatedTopLevelKeyNamesBothLines) {
  auto r = load_yaml_document("name: a\nnodes: [x]\nversion: 1\nnodes: [y]\n", "c.yaml");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().to_string(), "c.yaml:4:1: key 'nodes' repeated, first at line 2");
}

TEST(YamlDocument, RepeatedKeyDeepInsideSequencesAndFlowMappings) {
  auto r = load_yaml_document("a:\n  - b: 1\n  - {c: 1, d: 2, c: 3}\n", "f.yaml");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().where.line, 3);
  EXPECT_NE(r.error().message.find("key 'c' repeated, first at line 3"), std::string::npos);
}

// Aliases are their anchored node: each level below refers twice to the one above, so a
// walk of the document as a tree would visit the first map 2^40 times (a 55-byte input of
// this shape hung the placement_file fuzz target). Each node is checked once.
std::string nested_aliases(const std::string& first) {
  std::string text = "a0: &a0 " + first + "\n";
  for (int i = 1; i <= 40; ++i) text += fmt::format("a{}: &a{} [*a{}, *a{}]\n", i, i, i - 1, i - 1);
  return text;
}

TEST(YamlDocument, NestedAliasesAreCheckedOnceEach) {
  auto ok = load_yaml_document(nested_aliases("{k: 1, l: 2}"), "a.yaml");
  ASSERT_TRUE(ok) << ok.error().to_string();
  auto repeated = load_yaml_document(nested_aliases("{k: 1, k: 2}"), "a.yaml");
  ASSERT_FALSE(repeated);
  EXPECT_EQ(repeated.error().to_string(), "a.yaml:1:16: key 'k' repeated, first at line 1");
  // A map and its first key, a flow map, start at the same byte: both are still checked.
  auto in_key = load_yaml_document("{k: 1, k: 2}: x\n", "b.yaml");
  ASSERT_FALSE(in_key);
  EXPECT_NE(in_key.error().message.find("key 'k' repeated"), std::string::npos);
}

TEST(YamlDocument, RepeatedKeyInJson) {
  auto r = load_yaml_document("{\"jobs\": [],\n \"jobs\": [1]}", "s.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().where.line, 2);
  EXPECT_NE(r.error().message.find("'jobs' repeated, first at line 1"), std::string::npos);
}

TEST(YamlDocument, TextThatIsNotUtf8IsRefusedWhereItStops) {
  // A stray 0x99 inside a job id (make mutations, 2026-12-05), a lone continuation byte, a
  // surrogate encoded as UTF-8 (ED A0 80) and a truncated sequence at the end.
  auto stray = load_yaml_document("{\"jobs\": [\n  {\"id\": \"tra\x99in\"}]}", "s.json");
  ASSERT_FALSE(stray);
  EXPECT_EQ(stray.error().to_string(), "s.json:2:14: expected UTF-8 text (YAML and JSON files are Unicode), found byte 0x99");
  for (const char* text : {"name: \x80x\n", "name: t\xed\xa0\x80rain\n", "name: caf\xc3"}) {
    auto r = load_yaml_document(text, "c.yaml");
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().where.line, 1);
    EXPECT_NE(r.error().message.find("expected UTF-8 text"), std::string::npos);
  }
}

TEST(YamlDocument, Utf8NamesAreRead) {
  auto r = load_yaml_document("name: caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x9a\x80\n", "c.yaml");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ((*r)["name"].Scalar(), "caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x9a\x80");
}

TEST(YamlDocument, Utf16WithByteOrderMarkIsLeftToYamlCpp) {
  // "a: 1" in UTF-16LE with its mark: not UTF-8, but yaml-cpp decodes it.
  const std::string utf16le("\xFF\xFE" "a\0:\0 \0" "1\0", 10);
  auto r = load_yaml_document(utf16le, "u.yaml");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ((*r)["a"].as<int>(), 1);
}

TEST(YamlDocument, EqualKeysInDifferentMappingsAreFine) {
  auto r = load_yaml_document("a: {name: x}\nb: {name: y}\nlist: [{name: 1}, {name: 2}]\n", "ok.yaml");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ((*r)["b"]["name"].Scalar(), "y");
}

TEST(YamlDocument, SecondDocumentOrTrailingJsonIsAnError) {
  auto two = load_yaml_document("a: 1\n---\nb: 2\n", "two.yaml");
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().where.line, 2);  // the '---' that starts the second document
  EXPECT_NE(two.error().message.find("second document"), std::string::npos);
  auto trailing = load_yaml_document("{\"a\": 1}\ngarbage\n", "t.json");
  ASSERT_FALSE(trailing);
  EXPECT_EQ(trailing.error().where.line, 2);
  EXPECT_TRUE(load_yaml_document("a: 1\n...\n", "end.yaml")) << "an explicit document end is fine";
}

// Most files skip the event-only pass (a block mapping at column 0 with no '---' or '...'
// line cannot hold a second document); every shape that can still gets it.
TEST(YamlDocument, EveryShapeThatCanHoldASecondDocumentIsStillChecked) {
  struct Case {
    const char* text;
    int line;  // where the second document starts
  };
  const Case cases[] = {
      {"- a\n- b\n{c: 1}\n", 3},           // a block sequence root, then a flow mapping
      {"- a\nb: 1\n", 2},                   // a block sequence root, then a mapping
      {"# head\n\n- a\nb: 1\n", 4},         // the same after a comment and a blank line
      {"[1]\n[2]\n", 2},                    // flow roots
      {"a: 1\n...\nb: 2\n", 3},              // a document end, then more
      {"a: 1\n--- b\n", 2},                 // a marker with content on its line
      {"  a: 1\n  b: 2\n---\nc: 3\n", 3},    // an indented root
      {"\"a\": 1\n---\n\"b\": 2\n", 2},       // a quoted first key
  };
  for (const Case& c : cases) {
    auto r = load_yaml_document(c.text, "two.yaml");
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().where.line, c.line) << c.text;
    EXPECT_NE(r.error().message.find("second document"), std::string::npos) << c.text;
  }
  // Markers that are not markers: indented, in a block scalar, or part of a longer word.
  for (const char* one : {"a: |\n  ---\n  x\nb: 2\n", "a: 1\n----\nb: 2\n", "a:\n  - ---\n"}) {
    auto r = load_yaml_document(one, "one.yaml");
    if (!r) {
      EXPECT_EQ(r.error().message.find("second document"), std::string::npos) << one;
    }
  }
}

TEST(YamlDocument, EmptyInputIsANullDocument) {
  auto r = load_yaml_document("", "e.yaml");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->IsNull() || !r->IsDefined());
}

TEST(YamlDocument, SyntaxErrorKeepsItsPosition) {
  auto r = load_yaml_document("a: [1, 2\nb: 3\n", "bad.yaml");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().where.file, "bad.yaml");
  EXPECT_GT(r.error().where.line, 0);
}

TEST(TemporaryFiles, RegistryHandsOutAndReusesSlots) {
  int a = track_temporary_file("/tmp/toposched-a");
  int b = track_temporary_file("/tmp/toposched-b");
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(a, b);
  untrack_temporary_file(a);
  EXPECT_EQ(track_temporary_file("/tmp/toposched-c"), a);
  untrack_temporary_file(a);
  untrack_temporary_file(b);
  EXPECT_EQ(track_temporary_file(std::string(5000, 'x')), -1) << "paths too long are not tracked";
}

// A process killed by SIGTERM while a temporary file is registered: the handler unlinks it
// and the process still dies of SIGTERM.
TEST(TemporaryFilesDeathTest, SigtermRemovesRegisteredFiles) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("toposched-sigterm-" + std::to_string(::getpid()) + ".tmp")).string();
  EXPECT_EXIT(
      {
        install_temporary_file_cleanup();
        std::ofstream(path) << "partial";
        track_temporary_file(path);
        std::raise(SIGTERM);
      },
      testing::KilledBySignal(SIGTERM), "");
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove(path);
}

TEST(TemporaryFilesDeathTest, SigintRemovesRegisteredFilesButNotOthers) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tracked = (dir / ("toposched-sigint-" + std::to_string(::getpid()) + ".tmp")).string();
  const std::string kept = (dir / ("toposched-sigint-" + std::to_string(::getpid()) + ".keep")).string();
  std::ofstream(kept) << "keep";
  EXPECT_EXIT(
      {
        install_temporary_file_cleanup();
        std::ofstream(tracked) << "partial";
        track_temporary_file(tracked);
        std::raise(SIGINT);
      },
      testing::KilledBySignal(SIGINT), "");
  EXPECT_FALSE(std::filesystem::exists(tracked));
  EXPECT_TRUE(std::filesystem::exists(kept));
  std::filesystem::remove(kept);
}

TEST(TemporaryFiles, AtomicWriteLeavesOnlyTheTarget) {
  const auto dir = std::filesystem::temp_directory_path() / ("toposched-atomic-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_file_atomically((dir / "out.txt").string(), "hello\n"));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "out.txt");
  }
  EXPECT_EQ(files, 1);
  // The slot is free again: nothing of this write is left for a signal to unlink.
  int slot = track_temporary_file("/tmp/probe");
  EXPECT_GE(slot, 0);
  untrack_temporary_file(slot);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace toposched
