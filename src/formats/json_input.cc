#include "formats/json_input.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace toposched {
namespace {

// An input iterator over the text that publishes how far the parser has read, so the
// parser callback (which nlohmann gives no position) can place a repeated key.
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* at, const char** progress) : at_(at), progress_(progress) {}
  reference operator*() const { return *at_; }
  TrackingIterator& operator++() {
    *progress_ = ++at_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackingIterator& other) const { return at_ == other.at_; }
  bool operator!=(const TrackingIterator& other) const { return at_ != other.at_; }

 private:
  const char* at_;
  const char** progress_;
};

// Byte offset where the key just read starts: the parser has consumed its closing quote
// (and possibly a little beyond); the opening quote is the last unescaped one before it.
std::size_t key_start(std::string_view text, std::size_t read_up_to) {
  std::size_t end = std::min(read_up_to, text.size());
  std::size_t close = text.rfind('"', end == 0 ? 0 : end - 1);
  if (close == std::string_view::npos || close == 0) return 0;
  std::size_t open = close;
  while (open > 0) {
    open = text.rfind('"', open - 1);
    if (open == std::string_view::npos) return 0;
    std::size_t backslashes = 0;
    while (open > backslashes && text[open - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return open;
  }
  return 0;
}

// Thrown by the parser callback to stop at the first container past kMaxJsonDepth.
struct TooDeep {
  std::size_t offset;  // bytes read when it opened
};

}  // namespace

std::string quote_json(const nlohmann::json& value) {
  constexpr std::size_t kMaxQuote = 60;
  if (value.is_array()) return fmt::format("an array of {} element(s)", value.size());
  if (value.is_object()) return fmt::format("an object of {} key(s)", value.size());
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxQuote) text = text.substr(0, kMaxQuote - 3) + "...";
  return text;
}

SourceLocation location_of_offset(std::string_view text, std::size_t offset, const std::string& file) {
  offset = std::min(offset, text.size());
  std::string_view before = text.substr(0, offset);
  int line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
  std::size_t line_start = before.rfind('\n');
  int column = 1 + static_cast<int>(line_start == std::string_view::npos ? offset : offset - line_start - 1);
  return SourceLocation{file, line, column};
}

SourceLocation OffsetLocator::at(std::size_t offset) {
  offset = std::min(offset, text_.size());
  if (offset < scanned_) scanned_ = 0, line_ = 1, line_start_ = 0;
  for (; scanned_ < offset; ++scanned_)
    if (text_[scanned_] == '\n') ++line_, line_start_ = scanned_ + 1;
  return SourceLocation{file_, line_, 1 + static_cast<int>(offset - line_start_)};
}

Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& file) {
  const char* progress = text.data();
  // One key set per open object; the offset of each key's first occurrence.
  std::vector<std::unordered_map<std::string, std::size_t>> open_objects;
  std::optional<Error> repeated;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    // `depth` counts the containers open around this one; stop before building deeper.
    if ((event == E::object_start || event == E::array_start) && depth >= kMaxJsonDepth)
      throw TooDeep{static_cast<std::size_t>(progress - text.data())};
    if (event == E::object_start) {
      open_objects.emplace_back();
    } else if (event == E::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == E::key && !open_objects.empty() && !repeated) {
      std::size_t at = key_start(text, static_cast<std::size_t>(progress - text.data()));
      auto [first, inserted] = open_objects.back().emplace(parsed.get<std::string>(), at);
      if (!inserted) {
        std::string key = parsed.get<std::string>();
        if (key.size() > 60) key = key.substr(0, 57) + "...";
        repeated = Error{ErrorCode::kParse,
                         fmt::format("key '{}' repeated, first at line {}", key,
                                     location_of_offset(text, first->second, file).line),
                         location_of_offset(text, at, file)};
      }
    }
    return true;
  };
  try {
    TrackingIterator begin(text.data(), &progress), end(text.data() + text.size(), &progress);
    nlohmann::json doc = nlohmann::json::parse(begin, end, callback);
    if (repeated) return tl::unexpected(*repeated);
    return doc;
  } catch (const TooDeep& deep) {
    return make_error(ErrorCode::kParse,
                      fmt::format("arrays and objects nested more than {} deep", kMaxJsonDepth),
                      location_of_offset(text, deep.offset > 0 ? deep.offset - 1 : 0, file));
  } catch (const nlohmann::json::exception& e) {
    std::size_t byte = 0;
    if (const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e)) byte = pe->byte > 0 ? pe->byte - 1 : 0;
    return make_error(ErrorCode::kParse, fmt::format("not valid JSON: {}", e.what()), location_of_offset(text, byte, file));
  }
}

}  // namespace toposched
