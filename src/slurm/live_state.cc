#include "slurm/live_state.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/json_input.h"
#include "topology/hostlist.h"
#include "topology/text.h"

namespace toposched::slurm {

namespace {

using Json = nlohmann::json;

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

Result<int> parse_int(std::string_view s, std::string_view what) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    return make_error(ErrorCode::kParse, fmt::format("expected a non-negative integer as {}, found '{}'", what, s));
  return v;
}

// Index lists as in "0-1,4": ranges and single values.
Result<std::vector<int>> parse_index_list(std::string_view list) {
  std::vector<int> out;
  for (const std::string& part : split(list, ',')) {
    auto dash = part.find('-');
    TOPOSCHED_TRY(lo, parse_int(std::string_view(part).substr(0, dash), "a GPU index"));
    int hi = lo;
    if (dash != std::string::npos) {
      TOPOSCHED_TRY(h, parse_int(std::string_view(part).substr(dash + 1), "a GPU index"));
      hi = h;
    }
    if (hi < lo || hi - lo > 4096)
      return make_error(ErrorCode::kParse, fmt::format("expected an index range low-high, found '{}'", part));
    for (int i = lo; i <= hi; ++i) out.push_back(i);
  }
  return out;
}

// Splits a gres list at the commas that are not inside parentheses.
std::vector<std::string> split_gres(std::string_view gres) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= gres.size(); ++i) {
    if (i == gres.size() || (gres[i] == ',' && depth == 0)) {
      if (i > start) out.emplace_back(gres.substr(start, i - start));
      start = i + 1;
    } else if (gres[i] == '(') {
      ++depth;
    } else if (gres[i] == ')') {
      --depth;
    }
  }
  return out;
}

// "gpu[:type]:count[(...)]" -> count, for name "gpu"; nullopt for other gres.
Result<std::optional<int>> gres_item_gpu_count(std::string_view item) {
  std::string_view head = item.substr(0, item.find('('));
  auto fields = split(head, ':');
  if (fields.empty() || fields[0] != "gpu") return std::optional<int>();
  if (fields.size() < 2) return std::optional<int>(1);  // "gpu" alone means one
  std::string_view count = fields.back();
  // A count may carry a unit suffix in old versions ("gpu:4" is the norm).
  TOPOSCHED_TRY(n, parse_int(count, "a gres count"));
  return std::optional<int>(n);
}

bool job_state_holds_resources(std::string_view state) {
  static const std::set<std::string, std::less<>> kHolding = {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED",
                                                               "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"};
  return kHolding.contains(state);
}

Error at_source(Error e, const std::string& source, int line) {
  if (e.where.file.empty()) e.where = {source, line, 0};
  return e;
}

// ---- sinfo --json / squeue --json ------------------------------------------------------

std::string json_string(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The located error for a missing or mistyped key of the i-th array element.
tl::unexpected<Error> json_shape_error(const std::string& source, std::string_view what) {
  return make_error(ErrorCode::kParse, std::string(what), {source, 0, 0});
}

// "real_memory": a number (Slurm 21.08-23.02), or {"set": true, "infinite": false,
// "number": N} (the "no value" struct of later data parsers); absent or unset is 0.
Result<long long> json_real_memory(const Json& n, const std::string& name, const std::string& source) {
  auto it = n.find("real_memory");
  if (it == n.end() || it->is_null()) return 0;
  const Json* v = &*it;
  if (v->is_object()) {
    auto set = v->find("set");
    if (set != v->end() && set->is_boolean() && !set->get<bool>()) return 0;
    auto number = v->find("number");
    if (number == v->end()) return 0;
    v = &*number;
  }
  if (!v->is_number_integer() || v->get<long long>() < 0)
    return json_shape_error(source, fmt::format("node {}: expected \"real_memory\" to be a non-negative integer "
                                                "(megabytes), found {}", name, v->dump()));
  return v->get<long long>();
}

Result<SlurmNode> node_from_json(const Json& n, std::size_t i, const std::string& source) {
  if (!n.is_object()) return json_shape_error(source, fmt::format("nodes[{}]: expected an object", i));
  SlurmNode node;
  node.name = json_string(n, "name");
  if (node.name.empty()) return json_shape_error(source, fmt::format("nodes[{}]: expected a string \"name\"", i));
  // 22.05: "state": "mixed", "state_flags": ["DRAIN"]; 23.x+: "state": ["MIXED", "DRAIN"].
  auto st = n.find("state");
  if (st != n.end() && st->is_string()) {
    node.state = ascii_lower(st->get<std::string>());
  } else if (st != n.end() && st->is_array() && !st->empty() && (*st)[0].is_string()) {
    node.state = ascii_lower((*st)[0].get<std::string>());
    for (std::size_t k = 1; k < st->size(); ++k)
      if ((*st)[k].is_string()) node.flags.push_back(ascii_upper((*st)[k].get<std::string>()));
  } else {
    return json_shape_error(source, fmt::format("node {}: expected \"state\" (a string or an array)", node.name));
  }
  if (auto fl = n.find("state_flags"); fl != n.end() && fl->is_array())
    for (const auto& f : *fl)
      if (f.is_string()) node.flags.push_back(ascii_upper(f.get<std::string>()));
  if (auto parts = n.find("partitions"); parts != n.end() && parts->is_array())
    for (const auto& p : *parts)
      if (p.is_string()) node.partitions.push_back(p.get<std::string>());
  auto gpus = parse_gres_gpu_count(json_string(n, "gres"));
  if (!gpus) return json_shape_error(source, fmt::format("node {}: gres: {}", node.name, gpus.error().message));
  node.gpus = *gpus;
  node.gpu_type = parse_gres_gpu_type(json_string(n, "gres"));
  TOPOSCHED_TRY(memory, json_real_memory(n, node.name, source));
  node.real_memory_mb = memory;
  return node;
}

// Allocated node names of a squeue job, in the order of gres_detail (one entry per node).
Result<std::vector<std::string>> job_allocated_nodes(const Json& job, const std::string& id, const std::string& source) {
  std::vector<std::string> names;
  auto res = job.find("job_resources");
  if (res != job.end() && res->is_object()) {
    auto alloc = res->find("allocated_nodes");
    if (alloc == res->end()) alloc = res->find("nodes");  // 23.x: job_resources.nodes.allocation
    if (alloc != res->end() && alloc->is_array()) {
      for (const auto& a : *alloc) {
        std::string name = a.is_object() ? (a.contains("nodename") ? json_string(a, "nodename") : json_string(a, "name"))
                                         : std::string();
        if (name.empty())
          return json_shape_error(source, fmt::format("job {}: job_resources node without a name", id));
        names.push_back(name);
      }
      return names;
    }
  }
  // Fall back to the job's node list.
  std::string list = json_string(job, "nodes");
  if (list.empty()) return names;
  auto expanded = expand_hostlist(list);
  if (!expanded) return json_shape_error(source, fmt::format("job {}: nodes '{}': {}", id, list, expanded.error().message));
  return *expanded;
}

Result<SlurmJob> job_from_json(const Json& j, std::size_t i, const std::string& source) {
  if (!j.is_object()) return json_shape_error(source, fmt::format("jobs[{}]: expected an object", i));
  SlurmJob job;
  auto id = j.find("job_id");
  if (id == j.end() || !id->is_number_integer())
    return json_shape_error(source, fmt::format("jobs[{}]: expected an integer \"job_id\"", i));
  job.id = std::to_string(id->get<long long>());
  if (auto task = j.find("array_task_id"); task != j.end() && task->is_number_integer() && task->get<long long>() >= 0)
    job.id = fmt::format("{}_{}", j.value("array_job_id", 0LL), task->get<long long>());
  auto st = j.find("job_state");
  if (st != j.end() && st->is_string()) {
    job.state = ascii_upper(st->get<std::string>());
  } else if (st != j.end() && st->is_array() && !st->empty() && (*st)[0].is_string()) {
    job.state = ascii_upper((*st)[0].get<std::string>());
  } else {
    return json_shape_error(source, fmt::format("job {}: expected \"job_state\"", job.id));
  }
  job.name = json_string(j, "name");
  job.comment = json_string(j, "comment");
  job.admin_comment = json_string(j, "admin_comment");
  if (!job.holds_resources()) return job;
  TOPOSCHED_TRY(names, job_allocated_nodes(j, job.id, source));
  std::vector<std::string> details;
  if (auto gd = j.find("gres_detail"); gd != j.end() && gd->is_array())
    for (const auto& d : *gd) details.push_back(d.is_string() ? d.get<std::string>() : std::string());
  if (!details.empty() && details.size() != names.size())
    return json_shape_error(source, fmt::format("job {}: {} gres_detail entries for {} allocated nodes", job.id,
                                                details.size(), names.size()));
  for (std::size_t k = 0; k < names.size(); ++k) {
    SlurmJobNode node{names[k], {}};
    if (!details.empty()) {
      auto idx = parse_gres_gpu_indices(details[k]);
      if (!idx) return json_shape_error(source, fmt::format("job {}: gres_detail '{}': {}", job.id, details[k], idx.error().message));
      node.gpu_indices = *idx;
    }
    job.nodes.push_back(std::move(node));
  }
  return job;
}

const Json* top_level_array(const Json& doc, const char* key) {
  if (!doc.is_object()) return nullptr;
  auto it = doc.find(key);
  return it != doc.end() && it->is_array() ? &*it : nullptr;
}

// ---- scontrol: one record per line (-o) or per indented block, Key=Value tokens ----------

struct Token {
  std::string key;
  std::string value;
};

std::vector<Token> tokens_of(std::string_view line) {
  std::vector<Token> out;
  for (const std::string& word : split(line, ' ')) {
    auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      // A value containing spaces (OS=Linux 6.1 #1 SMP ...) continues the previous token.
      if (!out.empty()) out.back().value += " " + word;
      continue;
    }
    out.push_back({word.substr(0, eq), word.substr(eq + 1)});
  }
  return out;
}

std::string token_value(const std::vector<Token>& tokens, std::string_view key) {
  for (const auto& t : tokens)
    if (t.key == key) return t.value;
  return {};
}

bool has_token(const std::vector<Token>& tokens, std::string_view key) {
  return std::any_of(tokens.begin(), tokens.end(), [&](const Token& t) { return t.key == key; });
}

// "MIXED+DRAIN" / "DOWN*" / "IDLE+CLOUD+POWERED_DOWN" -> base state and flags.
void split_node_state(std::string_view text, SlurmNode& node) {
  std::string s(text);
  if (!s.empty() && s.back() == '*') {  // '*': the node does not respond
    s.pop_back();
    node.flags.push_back("NOT_RESPONDING");
  }
  auto parts = split(s, '+');
  if (parts.empty()) return;
  node.state = ascii_lower(parts[0]);
  for (std::size_t i = 1; i < parts.size(); ++i) node.flags.push_back(ascii_upper(parts[i]));
}

// Lines of a `scontrol -o` output; a last line without its newline is partial output.
Result<std::vector<std::string_view>> complete_lines(std::string_view text, const std::string& source) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos)
      return make_error(ErrorCode::kParse, "the output ends in the middle of a record (truncated?): expected a newline",
                        location_of(text, text.size(), source));
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// One record of scontrol's output and the line it starts on. `scontrol -o` prints a record
// per line; without -o a record's first line starts at column 0 and its further lines are
// indented (three spaces), with a blank line between records: those lines are joined.
struct ScontrolRecord {
  std::string text;
  int line = 0;
  std::vector<std::pair<std::size_t, int>> continued;  // (offset in text, line) of each joined line

  // The line of the token `key=`, for errors: the record's first line unless a joined line holds it.
  int line_of(std::string_view key) const {
    const std::string token = std::string(key) + "=";
    const std::size_t at = text.rfind(token, 0) == 0 ? 0 : text.find(" " + token);
    int l = line;
    for (const auto& [offset, joined] : continued)
      if (at != std::string::npos && at >= offset) l = joined;
    return l;
  }
};

std::vector<ScontrolRecord> scontrol_records(const std::vector<std::string_view>& lines) {
  std::vector<ScontrolRecord> out;
  bool open = false;  // whether the last record may take continuation lines
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    const std::size_t first = l.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) {
      open = false;
      continue;
    }
    if (first > 0 && open) {
      out.back().text += ' ';
      out.back().continued.emplace_back(out.back().text.size(), static_cast<int>(i + 1));
      out.back().text += l.substr(first);
      continue;
    }
    out.push_back({std::string(l.substr(first)), static_cast<int>(i + 1), {}});
    open = true;
  }
  return out;
}

Result<std::vector<SlurmJobNode>> scontrol_job_nodes(const std::vector<Token>& tokens, const std::string& id) {
  // -d prints one "Nodes=HOSTLIST CPU_IDs=... Mem=... GRES=..." group per distinct allocation.
  std::vector<SlurmJobNode> out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].key != "Nodes") continue;
    TOPOSCHED_TRY(names, expand_hostlist(tokens[i].value));
    std::vector<int> gpus;
    for (std::size_t k = i + 1; k < tokens.size() && tokens[k].key != "Nodes"; ++k) {
      if (tokens[k].key != "GRES") continue;
      auto idx = parse_gres_gpu_indices(tokens[k].value);
      if (!idx)
        return make_error(ErrorCode::kParse, fmt::format("job {}: GRES={}: {}", id, tokens[k].value, idx.error().message));
      gpus = *idx;
    }
    for (auto& n : names) out.push_back({std::move(n), gpus});
  }
  if (out.empty()) {
    std::string list = token_value(tokens, "NodeList");
    if (!list.empty() && list != "(null)") {
      TOPOSCHED_TRY(names, expand_hostlist(list));
      for (auto& n : names) out.push_back({std::move(n), {}});
    }
  }
  return out;
}

}  // namespace

bool SlurmNode::usable() const {
  static const std::set<std::string, std::less<>> kUsableStates = {"idle", "mixed", "allocated", "completing"};
  static const std::set<std::string, std::less<>> kBlockingFlags = {
      "DRAIN", "DRAINING", "DRAINED", "FAIL", "FAILING", "MAINT", "MAINTENANCE", "NOT_RESPONDING",
      "NO_RESPOND", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERING_DOWN", "INVALID_REG", "FUTURE"};
  if (!kUsableStates.contains(state)) return false;
  return std::none_of(flags.begin(), flags.end(), [](const std::string& f) { return kBlockingFlags.contains(f); });
}

bool SlurmJob::holds_resources() const { return job_state_holds_resources(state); }

Result<std::vector<int>> parse_gres_gpu_indices(std::string_view gres) {
  std::vector<int> out;
  for (const std::string& item : split_gres(gres)) {
    if (item.rfind("gpu", 0) != 0 || (item.size() > 3 && item[3] != ':' && item[3] != '(')) continue;
    auto open = item.find("(IDX:");
    if (open == std::string::npos) {
      TOPOSCHED_TRY(count, gres_item_gpu_count(item));
      if (count && *count > 0)
        return make_error(ErrorCode::kParse,
                          fmt::format("expected GPU indices '(IDX:...)' after '{}' (scontrol -d / squeue --json "
                                      "print them when gres.conf names the GPU files)",
                                      item));
      continue;
    }
    auto close = item.find(')', open);
    if (close == std::string::npos)
      return make_error(ErrorCode::kParse, fmt::format("expected ')' closing '{}'", item.substr(open)));
    std::string_view list = std::string_view(item).substr(open + 5, close - open - 5);
    if (list == "N/A") continue;
    TOPOSCHED_TRY(idx, parse_index_list(list));
    out.insert(out.end(), idx.begin(), idx.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string parse_gres_gpu_type(std::string_view gres) {
  if (gres.empty() || gres == "(null)") return {};
  for (const std::string& item : split_gres(gres)) {
    auto fields = split(std::string_view(item).substr(0, item.find('(')), ':');
    // gpu:TYPE:COUNT names a type; gpu:COUNT and gpu do not.
    if (fields.size() >= 3 && fields[0] == "gpu") return fields[1];
  }
  return {};
}

Result<int> parse_gres_gpu_count(std::string_view gres) {
  int total = 0;
  if (gres.empty() || gres == "(null)") return 0;
  for (const std::string& item : split_gres(gres)) {
    TOPOSCHED_TRY(count, gres_item_gpu_count(item));
    if (count) total += *count;
  }
  return total;
}

Result<std::vector<SlurmNode>> parse_sinfo_json(std::string_view text, const std::string& source) {
  TOPOSCHED_TRY(doc, parse_json_document(text, source));
  const Json* nodes = top_level_array(doc, "nodes");
  if (!nodes) return make_error(ErrorCode::kParse, "expected an object with a \"nodes\" array (sinfo --json)", {source, 1, 1});
  std::vector<SlurmNode> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    TOPOSCHED_TRY(node, node_from_json((*nodes)[i], i, source));
    // sinfo --json lists a node once per partition in some versions: merge.
    if (!seen.insert(node.name).second) continue;
    out.push_back(std::move(node));
  }
  return out;
}

Result<std::vector<SlurmJob>> parse_squeue_json(std::string_view text, const std::string& source) {
  TOPOSCHED_TRY(doc, parse_json_document(text, source));
  const Json* jobs = top_level_array(doc, "jobs");
  if (!jobs) return make_error(ErrorCode::kParse, "expected an object with a \"jobs\" array (squeue --json)", {source, 1, 1});
  std::vector<SlurmJob> out;
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    TOPOSCHED_TRY(job, job_from_json((*jobs)[i], i, source));
    out.push_back(std::move(job));
  }
  return out;
}

Result<std::vector<SlurmNode>> parse_scontrol_nodes(std::string_view text, const std::string& source) {
  TOPOSCHED_TRY(lines, complete_lines(text, source));
  std::vector<SlurmNode> out;
  for (const ScontrolRecord& record : scontrol_records(lines)) {
    if (record.text.rfind("No nodes", 0) == 0) continue;
    auto tokens = tokens_of(record.text);
    const int line = record.line;
    SlurmNode node;
    node.name = token_value(tokens, "NodeName");
    if (node.name.empty() || !has_token(tokens, "State"))
      return make_error(ErrorCode::kParse, "expected a node record 'NodeName=... State=...'", {source, line, 1});
    split_node_state(token_value(tokens, "State"), node);
    node.partitions = split(token_value(tokens, "Partitions"), ',');
    auto gpus = parse_gres_gpu_count(token_value(tokens, "Gres"));
    if (!gpus) return tl::unexpected(at_source(gpus.error(), source, record.line_of("Gres")));
    node.gpus = *gpus;
    node.gpu_type = parse_gres_gpu_type(token_value(tokens, "Gres"));
    if (const std::string memory = token_value(tokens, "RealMemory"); !memory.empty()) {
      auto mb = parse_int(memory, "RealMemory (megabytes)");
      if (!mb) return tl::unexpected(at_source(mb.error(), source, record.line_of("RealMemory")));
      node.real_memory_mb = *mb;
    }
    out.push_back(std::move(node));
  }
  return out;
}

Result<std::vector<SlurmJob>> parse_scontrol_jobs(std::string_view text, const std::string& source) {
  TOPOSCHED_TRY(lines, complete_lines(text, source));
  std::vector<SlurmJob> out;
  for (const ScontrolRecord& record : scontrol_records(lines)) {
    if (record.text.rfind("No jobs", 0) == 0) continue;
    auto tokens = tokens_of(record.text);
    const int line = record.line;
    SlurmJob job;
    job.id = token_value(tokens, "JobId");
    if (job.id.empty() || !has_token(tokens, "JobState"))
      return make_error(ErrorCode::kParse, "expected a job record 'JobId=... JobState=...'", {source, line, 1});
    if (std::string task = token_value(tokens, "ArrayTaskId"); !task.empty())
      job.id = fmt::format("{}_{}", token_value(tokens, "ArrayJobId"), task);
    job.state = ascii_upper(token_value(tokens, "JobState"));
    job.name = token_value(tokens, "JobName");
    job.comment = token_value(tokens, "Comment");
    job.admin_comment = token_value(tokens, "AdminComment");
    if (job.holds_resources()) {
      auto nodes = scontrol_job_nodes(tokens, job.id);
      if (!nodes) return tl::unexpected(at_source(nodes.error(), source, line));
      job.nodes = std::move(*nodes);
    }
    out.push_back(std::move(job));
  }
  return out;
}

std::string slurm_job_owner(std::string_view job_id) { return fmt::format("slurm-job:{}", job_id); }
std::string unavailable_owner(std::string_view node) { return fmt::format("slurm-unavailable:{}", node); }

Result<std::vector<GpuId>> slurm_job_gpus(const Cluster& cluster, const SlurmJob& job) {
  std::vector<GpuId> gpus;
  for (const SlurmJobNode& jn : job.nodes) {
    auto n = cluster.find_node(jn.node);
    if (!n) {
      if (jn.gpu_indices.empty()) continue;  // a CPU-only share of a node the spec does not model
      return make_error(ErrorCode::kValidation,
                        fmt::format("Slurm job {} holds GPUs on node '{}', which the cluster spec does not know; "
                                    "fix the spec (or Slurm's node names) before placing anything",
                                    job.id, jn.node));
    }
    for (int idx : jn.gpu_indices) {
      if (idx >= cluster.node_gpu_count(*n))
        return make_error(ErrorCode::kValidation,
                          fmt::format("Slurm job {} holds GPU index {} on node '{}', which has {} GPUs in the cluster spec",
                                      job.id, idx, jn.node, cluster.node_gpu_count(*n)));
      gpus.push_back(cluster.node_gpu(*n, idx));
    }
  }
  return gpus;
}

namespace {

bool in_partition(const SlurmNode& n, const std::string& partition) {
  return partition.empty() || std::find(n.partitions.begin(), n.partitions.end(), partition) != n.partitions.end();
}

NodeAvailabilityChange slurm_mark(const std::string& node, std::string reason) {
  return NodeAvailabilityChange{node, std::string(kSlurmSource), false, std::move(reason)};
}

// "Slurm state idle+DRAIN": the state and flags that make Slurm refuse the node.
std::string state_reason(const SlurmNode& n) {
  std::string state = n.state.empty() ? std::string("unknown") : n.state;
  for (const std::string& f : n.flags) state += "+" + f;
  return "Slurm state " + state;
}

}  // namespace

Result<LiveMapping> apply_live_state(const Cluster& cluster, const SlurmLiveState& live,
                                     const LiveMappingOptions& options) {
  LiveMapping out;
  std::unordered_map<std::string, const SlurmNode*> by_name;
  for (const SlurmNode& n : live.nodes) {
    by_name.emplace(n.name, &n);
    if (!cluster.find_node(n.name)) out.slurm_only_nodes.push_back(n.name);
  }
  if (!options.partition.empty()) {
    bool known = std::any_of(live.nodes.begin(), live.nodes.end(),
                             [&](const SlurmNode& n) { return in_partition(n, options.partition); });
    if (!known)
      return make_error(ErrorCode::kNotFound, fmt::format("no Slurm node is in partition '{}'", options.partition));
  }
  // Jobs hold their GPUs whatever the node's state.
  std::vector<std::string> taken(cluster.gpu_count());  // per GPU, the Slurm job holding it
  for (const SlurmJob& job : live.jobs) {
    if (!job.holds_resources()) continue;
    TOPOSCHED_TRY(gpus, slurm_job_gpus(cluster, job));
    for (GpuId g : gpus) {
      if (!taken[g.index()].empty())
        return make_error(ErrorCode::kValidation,
                          fmt::format("Slurm reports GPU {}:{} held by job {} and by {}",
                                      cluster.node_name(cluster.gpu_node(g)), cluster.gpu_local_index(g), job.id,
                                      taken[g.index()]));
      taken[g.index()] = slurm_job_owner(job.id);
    }
    if (gpus.empty()) continue;
    out.jobs_accounted.push_back(job.id);
    out.slurm_jobs.push_back({slurm_job_owner(job.id), std::move(gpus)});
  }
  for (std::uint32_t i = 0; i < cluster.node_count(); ++i) {
    NodeId n(i);
    const std::string& name = cluster.node_name(n);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      out.spec_only_nodes.push_back(name);
      out.node_marks.push_back(slurm_mark(name, "unknown to Slurm"));
      continue;
    }
    const SlurmNode& sn = *it->second;
    if (!sn.usable() || !in_partition(sn, options.partition)) {
      out.unusable_nodes.push_back(name);
      out.node_marks.push_back(
          slurm_mark(name, sn.usable() ? "not in partition " + options.partition : state_reason(sn)));
      continue;
    }
    if (sn.gpus != cluster.node_gpu_count(n)) {
      out.gpu_count_mismatches.push_back(
          fmt::format("{}: spec {} GPUs, Slurm {}", name, cluster.node_gpu_count(n), sn.gpus));
      // Slurm cannot hand out GPUs it does not have configured.
      for (int local = sn.gpus; local < cluster.node_gpu_count(n); ++local)
        if (GpuId g = cluster.node_gpu(n, local); taken[g.index()].empty()) out.unconfigured_gpus.push_back(g);
    }
  }
  return out;
}

Result<void> hold_live_mapping(Engine& engine, const LiveMapping& mapping) {
  std::vector<Command> commands;
  for (const HeldJob& job : mapping.slurm_jobs) {
    Command c;
    c.kind = Command::Kind::kPlace;
    c.place.job.job_id = job.id;
    c.place.policy = "slurm";
    c.hold_gpus = job.gpus;
    commands.push_back(std::move(c));
  }
  for (const NodeAvailabilityChange& mark : mapping.node_marks) {
    Command c;
    c.kind = Command::Kind::kSetNodeAvailability;
    c.availability = mark;
    commands.push_back(std::move(c));
  }
  for (auto& decided : engine.decide(commands, {}))
    if (!decided) return tl::unexpected(std::move(decided.error()));
  return {};
}

}  // namespace toposched::slurm
