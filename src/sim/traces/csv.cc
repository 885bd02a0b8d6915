#include "sim/traces/csv.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace toposched::sim::csv {

Reader::Reader(std::string_view text, std::string file, char sep)
    : text_(text), file_(std::move(file)), sep_(sep) {}

Result<std::optional<Record>> Reader::next() {
  while (pos_ < text_.size()) {
    ++line_;
    Record rec;
    rec.line = line_;
    std::size_t line_start = pos_;
    std::string field;
    int field_col = 1;
    bool in_quotes = false;
    bool done = false;
    int start_line = line_;
    while (!done) {
      if (pos_ >= text_.size()) {
        if (in_quotes)
          return make_error(ErrorCode::kParse, "unterminated quoted field (a '\"' is never closed)",
                            {file_, start_line, field_col});
        done = true;
        break;
      }
      char c = text_[pos_];
      if (in_quotes) {
        if (c == '"') {
          if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '"') {
            field.push_back('"');
            pos_ += 2;
          } else {
            in_quotes = false;
            ++pos_;
          }
        } else {
          if (c == '\n') ++line_, line_start = pos_ + 1;
          field.push_back(c);
          ++pos_;
        }
        continue;
      }
      if (c == '"' && field.empty()) {
        in_quotes = true;
        ++pos_;
      } else if (c == sep_) {
        rec.fields.push_back(std::move(field));
        rec.columns.push_back(field_col);
        field.clear();
        ++pos_;
        field_col = static_cast<int>(pos_ - line_start) + 1;
      } else if (c == '\n' || c == '\r') {
        if (c == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ++pos_;
        ++pos_;
        done = true;
      } else {
        field.push_back(c);
        ++pos_;
      }
    }
    rec.fields.push_back(std::move(field));
    rec.columns.push_back(field_col);
    bool blank = rec.fields.size() == 1 && trim(rec.fields[0]).empty();
    bool comment = !rec.fields.empty() && !rec.fields[0].empty() && rec.fields[0][0] == '#';
    if (blank || comment) continue;
    return std::optional<Record>(std::move(rec));
  }
  return std::optional<Record>();
}

std::unordered_map<std::string, int> header_index(const Record& header) {
  std::unordered_map<std::string, int> out;
  for (std::size_t i = 0; i < header.fields.size(); ++i) {
    std::string name = ascii_lower(trim(header.fields[i]));
    if (i == 0 && name.starts_with("\xEF\xBB\xBF")) name.erase(0, 3);  // UTF-8 BOM
    out.emplace(name, static_cast<int>(i));
  }
  return out;
}

SourceLocation where(const std::string& file, const Record& r, int field) {
  int col = field >= 0 && static_cast<std::size_t>(field) < r.columns.size() ? r.columns[static_cast<std::size_t>(field)] : 1;
  return {file, r.line, col};
}

tl::unexpected<Error> field_error(const std::string& file, const Record& r, int field, std::string message) {
  return make_error(ErrorCode::kParse, std::move(message), where(file, r, field));
}

Result<double> to_double(const std::string& file, const Record& r, int field, std::string_view what) {
  if (field < 0 || static_cast<std::size_t>(field) >= r.fields.size())
    return field_error(file, r, static_cast<int>(r.fields.size()) - 1,
                       fmt::format("expected a value for '{}', found only {} fields", what, r.fields.size()));
  std::string_view s = trim(r.fields[static_cast<std::size_t>(field)]);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v))
    return field_error(file, r, field, fmt::format("expected a number for '{}', found '{}'", what, s));
  return v;
}

Result<long long> to_int(const std::string& file, const Record& r, int field, std::string_view what) {
  auto d = to_double(file, r, field, what);
  if (!d) return tl::unexpected(d.error());
  if (*d != std::floor(*d) || std::fabs(*d) > 9.0e15)
    return field_error(file, r, field, fmt::format("expected a whole number for '{}', found '{}'", what,
                                                   trim(r.fields[static_cast<std::size_t>(field)])));
  return static_cast<long long>(*d);
}

namespace {
tl::unexpected<Error> field_count_error(const std::string& file, const Record& header, const Record& r) {
  return field_error(file, r, static_cast<int>(r.fields.size()) - 1,
                     fmt::format("expected {} fields as in the header, found {}", header.fields.size(), r.fields.size()));
}
}  // namespace

Result<void> for_each_row(Reader& reader, const Record& header, const std::function<Result<void>(const Record&)>& row) {
  for (;;) {
    auto rec = reader.next();
    if (!rec) return tl::unexpected(rec.error());
    if (!*rec) return {};
    const Record& r = **rec;
    if (r.fields.size() != header.fields.size()) return field_count_error(reader.file(), header, r);
    if (auto ok = row(r); !ok) return ok;
  }
}

Result<void> read_job_rows(Reader& reader, const Record& header, Trace& trace, const TraceReadOptions& options,
                           const std::function<Result<SimJob>(const Record&, bool& ignored)>& parse) {
  for (;;) {
    auto rec = reader.next();
    if (!rec) return tl::unexpected(rec.error());
    if (!*rec) return {};
    const Record& r = **rec;
    bool ignored = false;
    Result<SimJob> job = r.fields.size() != header.fields.size() ? field_count_error(reader.file(), header, r) : parse(r, ignored);
    if (!job) {
      if (auto ok = reject_row(trace, options, job.error()); !ok) return ok;
    } else if (ignored) {
      ++trace.ignored_rows;
    } else {
      trace.jobs.push_back(std::move(*job));
    }
  }
}

std::optional<double> parse_datetime(std::string_view s) {
  s = trim(s);
  int Y, M, D, h = 0, m = 0;
  double sec = 0;
  auto num = [&](std::size_t pos, std::size_t len, int& out) {
    if (pos + len > s.size()) return false;
    auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + len, out);
    return ec == std::errc() && p == s.data() + pos + len;
  };
  if (s.size() < 10 || s[4] != '-' || s[7] != '-' || !num(0, 4, Y) || !num(5, 2, M) || !num(8, 2, D)) return std::nullopt;
  if (s.size() > 10) {
    if ((s[10] != ' ' && s[10] != 'T') || s.size() < 19 || s[13] != ':' || s[16] != ':' || !num(11, 2, h) || !num(14, 2, m))
      return std::nullopt;
    std::string_view rest = s.substr(17);
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), sec);
    if (ec != std::errc() || p != rest.data() + rest.size()) return std::nullopt;
  }
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec < 0 || sec >= 61) return std::nullopt;
  // Days from civil (Howard Hinnant's algorithm).
  int y = Y - (M <= 2);
  int era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = static_cast<unsigned>(y - era * 400);
  unsigned doy = (153u * static_cast<unsigned>(M + (M > 2 ? -3 : 9)) + 2u) / 5u + static_cast<unsigned>(D) - 1u;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  long long days = static_cast<long long>(era) * 146097 + static_cast<long long>(doe) - 719468;
  return static_cast<double>(days) * 86400.0 + h * 3600.0 + m * 60.0 + sec;
}

}  // namespace toposched::sim::csv
