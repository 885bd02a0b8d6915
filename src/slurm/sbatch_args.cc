#include "slurm/sbatch_args.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace toposched::slurm {

namespace {

// sbatch long options that take no value (or only an optional one, given with '=').
const std::set<std::string, std::less<>> kLongFlags = {
    "--contiguous", "--exclusive", "--get-user-env", "--help", "--hold", "--ignore-pbs", "--kill-on-invalid-dep",
    "--no-kill", "--no-requeue", "--nice", "--overcommit", "--oversubscribe", "--parsable", "--propagate", "--quiet",
    "--reboot", "--requeue", "--spread-job", "--test-only", "--usage", "--use-min-nodes", "--verbose", "--version",
    "--wait", "--mail-user-none"};
// sbatch short options that take a value.
const std::string kShortWithValue = "AabcCdDeFGiJLMmnNopqSwtx";

// Options whose effect toposched decides: the user may not set them.
const std::set<std::string, std::less<>> kOwned = {"--nodelist", "--nodefile", "--distribution", "--gpu-bind",
                                                   "--gpus-per-task", "--exclude", "-w", "-F", "-m", "-x"};

tl::unexpected<Error> usage(std::string message) { return make_error(ErrorCode::kInvalidArgument, std::move(message)); }

Result<int> positive(std::string_view value, std::string_view option) {
  int v = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || p != value.data() + value.size() || v <= 0)
    return usage(fmt::format("sbatch {}: expected a positive count, found '{}'{}", option, value,
                             value.find('-') != std::string_view::npos ? " (give one node count, not a range)" : ""));
  return v;
}

// "[type:]count" as --gpus and --gpus-per-node take it.
Result<int> typed_count(std::string_view value, std::string_view option, std::string& type) {
  auto colon = value.rfind(':');
  if (colon != std::string_view::npos) {
    type = std::string(value.substr(0, colon));
    value = value.substr(colon + 1);
  }
  return positive(value, option);
}

// --gres list: takes the gpu item out (count, type), returns the rest ("" when nothing is left).
Result<std::string> take_gpu_gres(std::string_view list, SbatchSize& size) {
  std::vector<std::string> rest;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = std::min(list.find(',', start), list.size());
    std::string item(list.substr(start, end - start));
    start = end + 1;
    if (item.empty()) continue;
    if (item != "gpu" && item.rfind("gpu:", 0) != 0) {
      rest.push_back(item);
      continue;
    }
    std::string type;
    std::string_view spec = item == "gpu" ? std::string_view("1") : std::string_view(item).substr(4);
    TOPOSCHED_TRY(count, typed_count(spec, "--gres=gpu", type));
    size.gpus_per_node = count;
    size.gpu_type = type;
  }
  return fmt::format("{}", fmt::join(rest, ","));
}

// Splits "--name=value" / "-Xvalue" / "-X value" / "--name value" into (name, value, args used).
struct OptionWord {
  std::string name;
  std::optional<std::string> value;
  std::size_t words = 1;
};

OptionWord read_option(const std::vector<std::string>& args, std::size_t i) {
  const std::string& a = args[i];
  OptionWord w;
  if (a.rfind("--", 0) == 0) {
    auto eq = a.find('=');
    w.name = a.substr(0, eq);
    if (eq != std::string::npos) {
      w.value = a.substr(eq + 1);
    } else if (!kLongFlags.contains(w.name) && i + 1 < args.size()) {
      w.value = args[i + 1];
      w.words = 2;
    }
    return w;
  }
  w.name = a.substr(0, 2);
  if (kShortWithValue.find(a[1]) == std::string::npos) return w;
  if (a.size() > 2) {
    w.value = a.substr(a[2] == '=' ? 3 : 2);
  } else if (i + 1 < args.size()) {
    w.value = args[i + 1];
    w.words = 2;
  }
  return w;
}

// Applies one size option; false when `name` is not a size option.
Result<bool> read_size_option(const OptionWord& w, SbatchSize& size) {
  const std::string& n = w.name;
  const std::string v = w.value.value_or("");
  auto need_value = [&]() -> Result<void> {
    if (!w.value) return usage(fmt::format("sbatch {} needs a value", n));
    return {};
  };
  if (n == "-N" || n == "--nodes") {
    TOPOSCHED_CHECK(need_value());
    TOPOSCHED_TRY(c, positive(v, n));
    size.nodes = c;
  } else if (n == "-G" || n == "--gpus") {
    TOPOSCHED_CHECK(need_value());
    TOPOSCHED_TRY(c, typed_count(v, n, size.gpu_type));
    size.gpus = c;
  } else if (n == "--gpus-per-node") {
    TOPOSCHED_CHECK(need_value());
    TOPOSCHED_TRY(c, typed_count(v, n, size.gpu_type));
    size.gpus_per_node = c;
  } else if (n == "--gres") {
    TOPOSCHED_CHECK(need_value());
    TOPOSCHED_TRY(rest, take_gpu_gres(v, size));
    size.other_gres = rest;
  } else if (n == "-n" || n == "--ntasks") {
    TOPOSCHED_CHECK(need_value());
    TOPOSCHED_TRY(c, positive(v, n));
    size.ntasks = c;
  } else if (n == "--ntasks-per-node") {
    TOPOSCHED_CHECK(need_value());
    TOPOSCHED_TRY(c, positive(v, n));
    size.ntasks_per_node = c;
  } else {
    return false;
  }
  return true;
}

}  // namespace

Result<ParsedSbatchArgs> parse_sbatch_args(const std::vector<std::string>& args) {
  ParsedSbatchArgs out;
  std::size_t i = 0;
  while (i < args.size()) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') {  // the script: it and its arguments go as given
      out.kept.insert(out.kept.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      out.has_script_or_wrap = true;
      break;
    }
    OptionWord w = read_option(args, i);
    if (kOwned.contains(w.name))
      return usage(fmt::format("sbatch {}: toposched sets this option itself from its plan; leave it out", w.name));
    TOPOSCHED_TRY(is_size, read_size_option(w, out.size));
    if (!is_size) {
      if (w.name == "--exclusive") out.size.exclusive = true;
      if (w.name == "-p" || w.name == "--partition") out.size.partition = w.value.value_or("");
      if (w.name == "--wrap") out.has_script_or_wrap = true;
      for (std::size_t k = 0; k < w.words; ++k) out.kept.push_back(args[i + k]);
    }
    i += w.words;
  }
  if (!out.has_script_or_wrap)
    return usage("the sbatch arguments name no batch script and no --wrap=COMMAND; give one after the options");
  if (out.size.partition.find(',') != std::string::npos)
    return usage(fmt::format("sbatch --partition={}: toposched plans on one partition; name one", out.size.partition));
  return out;
}

}  // namespace toposched::slurm
