#include "formats/yaml_output.h"

#include <algorithm>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace toposched {
namespace {

using Json = nlohmann::ordered_json;

void emit(YAML::Emitter& out, const Json& j, YamlStyle style) {
  const bool compact = style == YamlStyle::kCompact;
  switch (j.type()) {
    case Json::value_t::object: {
      if (compact && j.size() <= 4 && std::all_of(j.begin(), j.end(), [](const Json& v) { return v.is_primitive(); }))
        out << YAML::Flow;
      out << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out << YAML::Key << it.key() << YAML::Value;
        emit(out, it.value(), style);
      }
      out << YAML::EndMap;
      break;
    }
    case Json::value_t::array: {
      if (compact && std::all_of(j.begin(), j.end(), [](const Json& v) { return v.is_number(); })) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& v : j) emit(out, v, style);
      out << YAML::EndSeq;
      break;
    }
    case Json::value_t::string: out << YAML::DoubleQuoted << j.get<std::string>(); break;
    case Json::value_t::boolean: out << (j.get<bool>() ? "true" : "false"); break;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: out << j.dump(); break;
    case Json::value_t::number_float: out << fmt::format("{}", j.get<double>()); break;
    default: out << YAML::Null; break;
  }
}

}  // namespace

std::string json_to_yaml(const Json& value, YamlStyle style) {
  YAML::Emitter out;
  out.SetIndent(2);
  if (style == YamlStyle::kBlock) out.SetSeqFormat(YAML::Block);
  emit(out, value, style);
  return std::string(out.c_str()) + "\n";
}

}  // namespace toposched
