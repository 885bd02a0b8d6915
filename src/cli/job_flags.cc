#include "cli/job_flags.h"

#include <algorithm>

namespace toposched::cli {

namespace {

// The row's own check (type, bounds, job id, workload name) as a CLI11 validator. Its
// name is what --help shows after the type ("INT:POSITIVE" for counts, as before).
CLI::Validator row_validator(const JobField& field) {
  CLI::Validator v(
      [&field](const std::string& value) -> std::string {
        PlaceRequest scratch;
        auto ok = set_job_field_from_text(field, value, scratch);
        if (ok) return std::string();
        std::string message = ok.error().message;
        if (message.starts_with("must be ")) message = "expected " + message.substr(8);
        return message;
      },
      field.type == JobFieldType::kInt && field.min == 1 ? "POSITIVE" : "");
  return v;
}

void add_flag_of(CLI::App& cmd, const JobField& field, PlaceRequest& target) {
  const std::string flag(field.cli_flag);
  const std::string help(field.help);
  JobFieldRef ref = field.ref(target);
  switch (field.type) {
    case JobFieldType::kInt:
      cmd.add_option(flag, *std::get<int*>(ref), help)->check(row_validator(field));
      break;
    case JobFieldType::kUint64:
      cmd.add_option(flag, *std::get<std::uint64_t*>(ref), help);
      break;
    case JobFieldType::kBool:
      cmd.add_flag(flag, *std::get<bool*>(ref), help);
      break;
    case JobFieldType::kString: {
      CLI::Option* o = cmd.add_option(flag, *std::get<std::string*>(ref), help);
      if (field.repeatable) o->delimiter(',')->multi_option_policy(CLI::MultiOptionPolicy::Join);
      if (field.check) o->check(row_validator(field));
      break;
    }
    case JobFieldType::kWorkload: {
      WorkloadKind* kind = std::get<WorkloadKind*>(ref);
      cmd.add_option_function<std::string>(
             flag, [kind](const std::string& name) { *kind = *parse_workload_kind(name); }, help)
          ->check(row_validator(field));
      break;
    }
  }
}

}  // namespace

void add_job_request_flags(CLI::App& cmd, PlaceRequest& target, std::span<const std::string_view> keys) {
  for (const JobField& field : job_fields()) {
    if (field.cli_flag.empty()) continue;
    if (!keys.empty() && std::find(keys.begin(), keys.end(), field.key) == keys.end()) continue;
    add_flag_of(cmd, field, target);
  }
}

}  // namespace toposched::cli
