#include "topology/yaml_document.h"

#include <algorithm>
#include <cctype>
#include <istream>
#include <streambuf>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include "topology/text.h"
#include "topology/utf8.h"

namespace toposched {
namespace {

// A key as it reads in a message: long keys are cut short.
std::string shown_key(const std::string& key) {
  return key.size() > 60 ? key.substr(0, 57) + "..." : key;
}

Result<void> check_map_keys(const YAML::Node& map, const std::string& file,
                            std::unordered_map<std::string_view, YAML::Mark>& seen) {
  seen.clear();
  for (auto it = map.begin(); it != map.end(); ++it) {
    // A copy of the handle: it->first belongs to a proxy that dies with the expression.
    const YAML::Node key = it->first;
    if (!key.IsScalar()) continue;  // the readers reject complex keys with their own message
    auto [at, inserted] = seen.emplace(key.Scalar(), key.Mark());
    if (!inserted)
      return make_error(ErrorCode::kParse,
                        fmt::format("key '{}' repeated, first at line {}", shown_key(key.Scalar()),
                                    at->second.line + 1),
                        location_of(key.Mark(), file));
  }
  return {};
}

}  // namespace

Result<void> check_unique_yaml_keys(const YAML::Node& root, const std::string& file) {
  std::vector<YAML::Node> pending{root};
  std::unordered_map<std::string_view, YAML::Mark> seen;
  // Each collection once: an alias is its anchored node itself, so a document whose aliases
  // nest (b: [*a, *a], c: [*b, *b], ...) walked as a tree costs exponential time (a 55-byte
  // input took minutes: the placement_file fuzz target). Keyed by start offset; is() decides.
  std::unordered_multimap<int, YAML::Node> visited;
  auto first_visit = [&](const YAML::Node& node) {
    const auto [from, to] = visited.equal_range(node.Mark().pos);
    for (auto it = from; it != to; ++it)
      if (it->second.is(node)) return false;
    visited.emplace(node.Mark().pos, node);
    return true;
  };
  while (!pending.empty()) {
    YAML::Node node = pending.back();
    pending.pop_back();
    if (!first_visit(node)) continue;
    if (node.IsMap()) {
      TOPOSCHED_CHECK(check_map_keys(node, file, seen));
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (it->first.IsMap() || it->first.IsSequence()) pending.push_back(it->first);
        if (it->second.IsMap() || it->second.IsSequence()) pending.push_back(it->second);
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node)
        if (item.IsMap() || item.IsSequence()) pending.push_back(item);
    }
  }
  return {};
}

namespace {

// Parser events of the first document are ignored; the first event of a second document
// stops the parse by throwing its position. yaml-cpp 0.7's LoadAll never returns on some
// trailing text (a flow document followed by a line of commas builds nodes forever), so the
// second document is only ever looked at, never built.
struct SecondDocument {
  YAML::Mark mark;
};

class SecondDocumentProbe : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents_++ > 0) throw SecondDocument{mark};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  int documents_ = 0;
};

// YAML text is Unicode (YAML 1.2, 5.1). yaml-cpp decodes UTF-16 and UTF-32 when a byte
// order mark says so, but passes any other byte through into its scalars: a name holding
// 0xff was read, and the writer of the answer (JSON, which must be UTF-8) failed later.
// So text without a UTF-16/32 mark must be UTF-8, and the first byte that is not says where.
Result<void> check_utf8_text(std::string_view text, const std::string& file) {
  const bool utf16_or_32 = text.starts_with("\xFE\xFF") || text.starts_with("\xFF\xFE") ||
                           text.starts_with(std::string_view("\0\0\xFE\xFF", 4));
  if (utf16_or_32) return {};
  const auto bad = first_invalid_utf8(text);
  if (!bad) return {};
  return make_error(ErrorCode::kParse,
                    fmt::format("expected UTF-8 text (YAML and JSON files are Unicode), found byte 0x{:02x}",
                                static_cast<unsigned char>(text[*bad])),
                    location_of(text, *bad, file));
}

// An input stream over text owned by the caller: yaml-cpp reads through std::istream, and
// YAML::Load(std::string) copies the text into a stringstream (a second copy of a 50 MB file).
class TextStreamBuf : public std::streambuf {
 public:
  explicit TextStreamBuf(std::string_view text) {
    char* begin = const_cast<char*>(text.data());  // read only: the get area is never written
    setg(begin, begin, begin + text.size());
  }
};

// Parses the whole text as events only, to find a second document before the first one is
// built: the probe keeps nothing, so the check costs no memory beside the tree built after it.
void refuse_second_document(std::string_view text) {
  TextStreamBuf buf(text);
  std::istream in(&buf);
  YAML::Parser parser(in);
  SecondDocumentProbe probe;
  while (parser.HandleNextDocument(probe)) {
  }
}

// Whether the text can hold a second document at all, read from its lines alone so that
// most files skip the event-only pass (a third of a large spec's read time). A second
// document needs a '---' or '...' line, except after a root that is not a block mapping:
// yaml-cpp reads "- a\nb: 1" or "[1]\n[2]" as two documents without a marker, while after a
// block mapping at column 0 any further text is either more of the mapping or an error.
// So only a file whose first line with content starts a block mapping key, and that has no
// marker line, skips the probe.
bool may_hold_second_document(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if ((line.starts_with("---") || line.starts_with("...")) &&
        (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r'))
      return true;
    at = end + 1;
  }
  std::size_t first = 0;
  while (first < text.size()) {  // the first line with content (not blank, not a comment)
    const std::size_t end = std::min(text.find('\n', first), text.size());
    const std::string_view line = trim(text.substr(first, end - first));
    if (!line.empty() && line.front() != '#') {
      const unsigned char c = static_cast<unsigned char>(line.front());
      const bool plain_key = std::isalnum(c) || c == '_' || c >= 0x80;
      const std::size_t colon = line.find(':');
      const bool key_colon = colon != std::string_view::npos &&
                             (colon + 1 == line.size() || line[colon + 1] == ' ' || line[colon + 1] == '\t');
      return !(plain_key && key_colon && first == text.find_first_not_of(" \t", first));
    }
    first = end + 1;
  }
  return false;  // nothing but blanks and comments
}

}  // namespace

Result<YAML::Node> load_yaml_document(std::string_view text, const std::string& file) {
  TOPOSCHED_CHECK(check_utf8_text(text, file));
  YAML::Node document;
  try {
    if (may_hold_second_document(text)) refuse_second_document(text);
    TextStreamBuf buf(text);
    std::istream in(&buf);
    document = YAML::Load(in);
  } catch (const SecondDocument& second) {
    return make_error(ErrorCode::kParse,
                      "expected the end of the input after the first document, found a second document "
                      "(a '---' line or further text); one file holds one document",
                      location_of(second.mark, file));
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's guard against stack exhaustion; its own message says "bad file".
    return make_error(ErrorCode::kParse,
                      fmt::format("invalid YAML/JSON: nesting deeper than {} levels of lists and mappings", e.depth() - 1),
                      location_of(e.mark, file));
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("invalid YAML/JSON: {}", e.msg), location_of(e.mark, file));
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kParse, fmt::format("invalid YAML/JSON: {}", e.what()), SourceLocation{file, 0, 0});
  }
  TOPOSCHED_CHECK(check_unique_yaml_keys(document, file));
  return document;
}

SourceLocation location_of(const YAML::Mark& mark, const std::string& file) {
  if (mark.is_null() || mark.line < 0) return SourceLocation{file, 0, 0};
  return SourceLocation{file, mark.line + 1, mark.column + 1};
}

}  // namespace toposched
