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

// What a syntax error says: a document that stops before it is complete (a killed client,
// a cut pipe, a record written halfway) is named as such, since nlohmann's own words for it
// ("unexpected end of input") do not point at the cause.
std::string syntax_error_message(std::string_view text, std::size_t byte, const nlohmann::json::exception& e) {
  const bool ends_early = byte >= text.size() || text.find_first_not_of(" \t\r\n", byte) == std::string_view::npos;
  if (ends_early) return "the JSON ends early (truncated output?): expected more, found the end";
  return fmt::format("not valid JSON: {}", e.what());
}

// The array's strings, or nullopt when `value` is not an array of strings.
std::optional<std::vector<std::string>> strings_of(const nlohmann::json& value) {
  if (!value.is_array()) return std::nullopt;
  std::vector<std::string> out;
  out.reserve(value.size());
  for (const auto& item : value) {
    if (!item.is_string()) return std::nullopt;
    out.push_back(item.get<std::string>());
  }
  return out;
}

// Thrown by the parser callback to stop at the first container past kMaxJsonDepth.
struct TooDeep {
  std::size_t offset;  // bytes read when it opened
};

}  // namespace

Result<std::vector<std::string>> json_string_array(const nlohmann::json& value, const std::string& source) {
  std::optional<std::vector<std::string>> out = strings_of(value);
  if (!out)
    return make_error(ErrorCode::kParse, fmt::format("expected an array of strings, found {}", quote_json(value)),
                      SourceLocation{source, 0, 0});
  return std::move(*out);
}

std::string quote_json(const nlohmann::json& value) {
  constexpr std::size_t kMaxQuote = 60;
  if (value.is_array()) return fmt::format("an array of {} element(s)", value.size());
  if (value.is_object()) return fmt::format("an object of {} key(s)", value.size());
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxQuote) text = text.substr(0, kMaxQuote - 3) + "...";
  return text;
}

Result<nlohmann::json> parse_json_document(std::string_view text, const std::string& file, int first_line) {
  // Where byte `offset` is, counting lines from first_line (a row cut out of a larger file).
  auto locate = [&](std::size_t offset) {
    SourceLocation where = location_of(text, offset, file);
    where.line += first_line - 1;
    return where;
  };
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
                         fmt::format("key '{}' repeated, first at line {}", key, locate(first->second).line),
                         locate(at)};
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
                      locate(deep.offset > 0 ? deep.offset - 1 : 0));
  } catch (const nlohmann::json::exception& e) {
    std::size_t byte = 0;
    if (const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e)) byte = pe->byte > 0 ? pe->byte - 1 : 0;
    return make_error(ErrorCode::kParse, syntax_error_message(text, byte, e), locate(byte));
  }
}

Result<JsonFields> JsonFields::of(const nlohmann::json& value, std::string source) {
  if (!value.is_object())
    return make_error(ErrorCode::kParse, fmt::format("expected a JSON object, found {}", quote_json(value)),
                      SourceLocation{std::move(source), 0, 0});
  return JsonFields(value, std::move(source));
}

const nlohmann::json* JsonFields::find(std::string_view key) const {
  auto it = object_->find(key);
  return it == object_->end() ? nullptr : &*it;
}

tl::unexpected<Error> JsonFields::error(std::string_view key, std::string_view message) const {
  return make_error(ErrorCode::kParse, fmt::format("'{}': {}", key, message), SourceLocation{source_, 0, 0});
}

Result<const nlohmann::json*> JsonFields::required(std::string_view key) const {
  const nlohmann::json* member = find(key);
  if (!member) return error(key, "expected this member, found none");
  return member;
}

Result<std::string> JsonFields::string(std::string_view key) const {
  TOPOSCHED_TRY(member, required(key));
  if (!member->is_string()) return error(key, fmt::format("expected a string, found {}", quote_json(*member)));
  return member->get<std::string>();
}

Result<std::int64_t> JsonFields::integer(std::string_view key) const {
  TOPOSCHED_TRY(member, required(key));
  // An unsigned value above INT64_MAX is nlohmann's number_unsigned: out of range here.
  if (!member->is_number_integer() || (member->is_number_unsigned() && member->get<std::uint64_t>() > INT64_MAX))
    return error(key, fmt::format("expected an integer (64-bit), found {}", quote_json(*member)));
  return member->get<std::int64_t>();
}

Result<std::vector<std::string>> JsonFields::strings(std::string_view key) const {
  TOPOSCHED_TRY(member, required(key));
  std::optional<std::vector<std::string>> out = strings_of(*member);
  if (!out) return error(key, fmt::format("expected an array of strings, found {}", quote_json(*member)));
  return std::move(*out);
}

Result<std::optional<std::string>> JsonFields::opt_string(std::string_view key) const {
  if (!find(key)) return std::optional<std::string>();
  TOPOSCHED_TRY(value, string(key));
  return std::optional<std::string>(std::move(value));
}

Result<std::optional<std::int64_t>> JsonFields::opt_integer(std::string_view key) const {
  if (!find(key)) return std::optional<std::int64_t>();
  TOPOSCHED_TRY(value, integer(key));
  return std::optional<std::int64_t>(value);
}

Result<std::optional<bool>> JsonFields::opt_boolean(std::string_view key) const {
  const nlohmann::json* member = find(key);
  if (!member) return std::optional<bool>();
  if (!member->is_boolean()) return error(key, fmt::format("expected true or false, found {}", quote_json(*member)));
  return std::optional<bool>(member->get<bool>());
}

}  // namespace toposched
