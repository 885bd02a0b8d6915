// The one typed field reader for YAML (and JSON, which yaml-cpp parses as YAML) in every
// layer: cluster specs and the other formats, job files (cost), generator parameters (sim),
// state files (placement). Every error names file:line:column and what was expected versus
// found. It lives in the lowest layer so that a reader in any layer uses it rather than
// writing its own (cost and sim had each grown one). yaml-cpp throws; these helpers catch
// and return Result, so no exception leaves a reader.
// Stateless apart from the file name; one instance per input, single-threaded.
#pragma once

#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "topology/error.h"
#include "topology/yaml_document.h"  // location_of(mark), for readers that catch yaml-cpp's exceptions

namespace toposched {

class YamlInput {
 public:
  explicit YamlInput(std::string file) : file_(std::move(file)) {}

  // Parses the whole text as one document (load_yaml_document: repeated keys and a second
  // document are errors); a syntax error carries its position.
  Result<YAML::Node> parse(std::string_view text) const;

  SourceLocation where(const YAML::Node& node) const;
  tl::unexpected<Error> error_at(const YAML::Node& node, std::string message) const;

  // Describes what a node is, for "found ..." in messages.
  static std::string describe(const YAML::Node& node);

  // Checks that `map` is a mapping whose keys are all in `allowed`.
  Result<void> expect_map(const YAML::Node& map, std::string_view what,
                          const std::set<std::string, std::less<>>& allowed) const;
  Result<void> expect_sequence(const YAML::Node& node, std::string_view what) const;

  // Scalar readers. `key` names the field in messages. Missing optional keys give nullopt.
  Result<std::string> string(const YAML::Node& node, std::string_view key) const;
  Result<double> number(const YAML::Node& node, std::string_view key) const;
  Result<long> integer(const YAML::Node& node, std::string_view key) const;
  Result<bool> boolean(const YAML::Node& node, std::string_view key) const;
  // A finite number in lo..hi ("expected 'KEY' in LO..HI, found V" otherwise).
  Result<double> number(const YAML::Node& node, std::string_view key, double lo, double hi) const;
  // A number in lo..hi that is whole: 4, 4.0 and 4e0 alike (integer() takes digits only).
  Result<long> whole_number(const YAML::Node& node, std::string_view key, long lo, long hi) const;
  // The index of the scalar among `options` ("expected 'KEY' to be one of a, b, found ...").
  Result<std::size_t> choice(const YAML::Node& node, std::string_view key,
                             std::initializer_list<std::string_view> options) const;
  // A list of strings, or one string of space-separated words.
  Result<std::vector<std::string>> words(const YAML::Node& node, std::string_view key) const;

  // Reads map[key] when present.
  Result<std::optional<std::string>> opt_string(const YAML::Node& map, std::string_view key) const;
  Result<std::optional<double>> opt_number(const YAML::Node& map, std::string_view key) const;
  Result<std::optional<long>> opt_integer(const YAML::Node& map, std::string_view key) const;
  Result<std::optional<bool>> opt_boolean(const YAML::Node& map, std::string_view key) const;
  // Reads map[key], which must be present.
  Result<std::string> req_string(const YAML::Node& map, std::string_view key) const;

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

}  // namespace toposched
