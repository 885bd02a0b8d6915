#include "placement/state_file.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "formats/json_fast_path.h"
#include "formats/json_output.h"
#include "topology/file_io.h"
#include "topology/text.h"
#include "topology/yaml_input.h"

namespace toposched {

namespace {
constexpr std::string_view kFormat = "toposched-allocation-state";
}

Result<std::string> state_to_json(const AllocationState& s) {
  const Cluster& c = s.cluster();
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = 1;
  j["cluster"] = c.name();
  j["gpus"] = c.gpu_count();
  j["jobs"] = nlohmann::ordered_json::array();
  for (const std::string& id : s.job_ids()) {
    nlohmann::ordered_json job;
    job["id"] = id;
    auto& gpus = job["gpus"] = nlohmann::ordered_json::array();
    for (GpuId g : s.job_gpus(id))
      gpus.push_back(fmt::format("{}:{}", c.node_name(c.gpu_node(g)), c.gpu_local_index(g)));
    j["jobs"].push_back(std::move(job));
  }
  TOPOSCHED_TRY(text, dump_json(j, 1));
  return text + "\n";
}

namespace {

namespace sj = simdjson::ondemand;
using json_fast_path::check_unused;
using json_fast_path::FastPathDeclines;
using json_fast_path::ObjectKeys;

// The fast path (formats/json_fast_path.h): the state file as toposched writes it, read
// with simdjson On Demand job by job, without a document tree (yaml-cpp's tree of a 50 MB
// file is about 3 GB). It gives exactly the yaml-cpp path's answer or declines: every
// value must be of the type the format names, with nothing the reader does not know. The
// errors it reports itself are those a well-formed file can hold (a job id twice, a GPU
// that two jobs hold), located where the yaml-cpp path locates them; as that path parses the whole document before it checks a job, the rest
// of the text is walked for what the parse would refuse first (then it declines).
class StateFastPath {
 public:
  StateFastPath(const Cluster& c, std::string_view text, const std::string& file, const char* base)
      : cluster_(c), text_(text), file_(file), base_(base), state_(c) {}

  Result<AllocationState> read(sj::object root) {
    ObjectKeys keys;
    bool format = false, cluster = false;
    for (auto field : root) {
      const std::string_view key = field.unescaped_key();
      keys.add(key);
      sj::value v = field.value();
      if (key == "format") {
        format = true;
        if (string_of(v) != kFormat) throw FastPathDeclines{};
      } else if (key == "version") {
        if (integer_of(v) != 1) throw FastPathDeclines{};
      } else if (key == "cluster") {
        cluster = true;
        if (string_of(v) != cluster_.name()) throw FastPathDeclines{};
      } else if (key == "gpus") {
        if (integer_of(v) != static_cast<std::int64_t>(cluster_.gpu_count())) throw FastPathDeclines{};
      } else if (key == "jobs") {
        if (v.type() != sj::json_type::array) throw FastPathDeclines{};
        for (auto job : v.get_array()) read_job(job.value());
      } else {
        throw FastPathDeclines{};
      }
    }
    // The yaml-cpp path checks the keys before the jobs: a file without them is its to report.
    if (!format || !cluster) throw FastPathDeclines{};
    if (first_error_) return tl::unexpected(*first_error_);
    return std::move(state_);
  }

 private:
  std::string_view string_of(sj::value v) {
    if (v.type() != sj::json_type::string) throw FastPathDeclines{};
    return v.get_string();
  }
  std::int64_t integer_of(sj::value v) {
    if (v.type() != sj::json_type::number || v.get_number_type() != sj::number_type::signed_integer) throw FastPathDeclines{};
    return v.get_int64();
  }
  std::size_t offset_of(sj::value& v) {
    auto loc = v.current_location();
    if (loc.error()) throw FastPathDeclines{};
    return static_cast<std::size_t>(loc.value_unsafe() - base_);
  }
  void fail(std::size_t offset, std::string message) {
    if (!first_error_) first_error_ = Error{ErrorCode::kParse, std::move(message), location_of(text_, offset, file_)};
  }

  void read_job(sj::value job) {
    if (first_error_) {  // only what the parse would refuse counts now
      check_unused(job, 2);
      return;
    }
    if (job.type() != sj::json_type::object) throw FastPathDeclines{};
    ObjectKeys keys;
    std::string id;
    std::size_t id_offset = 0, list_offset = 0;
    bool has_id = false, has_gpus = false;
    gpus_.clear();
    for (auto field : job.get_object()) {
      const std::string_view key = field.unescaped_key();
      keys.add(key);
      sj::value v = field.value();
      if (key == "id") {
        // The id comes first in every file toposched writes; the yaml-cpp path checks it
        // before the GPUs, so a file that lists them first is its to read.
        if (has_gpus) throw FastPathDeclines{};
        id_offset = offset_of(v);
        id = std::string(string_of(v));
        has_id = true;
      } else if (key == "gpus") {
        if (!has_id || v.type() != sj::json_type::array) throw FastPathDeclines{};
        list_offset = offset_of(v);
        has_gpus = true;
        read_gpus(v);
      } else {
        throw FastPathDeclines{};
      }
    }
    if (!has_id || !has_gpus || id.empty() || gpus_.empty()) throw FastPathDeclines{};
    if (state_.has_job(id)) return fail(id_offset, fmt::format("job '{}' appears twice", id));
    if (auto ok = state_.allocate(id, gpus_); !ok) fail(list_offset, ok.error().message);
  }

  // A name parse_gpu refuses is one the yaml-cpp path refuses too (the same checks), with
  // its own message: that path reports it.
  void read_gpus(sj::value list) {
    for (auto item : list.get_array()) {
      auto gpu = parse_gpu(cluster_, string_of(item.value()));
      if (!gpu) throw FastPathDeclines{};
      gpus_.push_back(*gpu);
    }
  }

  const Cluster& cluster_;
  std::string_view text_;
  const std::string& file_;
  const char* base_;  // the padded copy offsets are taken in
  AllocationState state_;
  std::vector<GpuId> gpus_;  // the job's, reused
  std::optional<Error> first_error_;
};

std::optional<Result<AllocationState>> state_from_json_fast(const Cluster& c, std::string_view text,
                                                            const std::string& file) {
  if (!json_fast_path::fast_path_may_read(text)) return std::nullopt;
  try {
    simdjson::padded_string padded(text);
    sj::parser parser;
    sj::document doc = parser.iterate(padded);
    StateFastPath reader(c, text, file, padded.data());
    auto result = reader.read(doc.get_object());
    // A location left after the object is text after it (a second document); at the end there is none.
    if (!doc.current_location().error()) return std::nullopt;
    return result;
  } catch (const FastPathDeclines&) {
    return std::nullopt;
  } catch (const simdjson::simdjson_error&) {
    return std::nullopt;
  }
}

}  // namespace

Result<AllocationState> state_from_json(const Cluster& c, std::string_view text, const std::string& file) {
  if (auto fast = state_from_json_fast(c, text, file)) return std::move(*fast);
  return state_from_json_exact(c, text, file);
}

Result<AllocationState> state_from_json_exact(const Cluster& c, std::string_view text, const std::string& file) {
  YamlInput in(file);
  auto root = in.parse(text);
  if (!root) return tl::unexpected(root.error());
  if (auto ok = in.expect_map(*root, "allocation state", {"format", "version", "cluster", "gpus", "jobs"}); !ok)
    return tl::unexpected(ok.error());
  auto format = in.req_string(*root, "format");
  if (!format) return tl::unexpected(format.error());
  if (*format != kFormat)
    return in.error_at((*root)["format"], fmt::format("expected format '{}', found '{}'", kFormat, *format));
  auto version = in.opt_integer(*root, "version");
  if (!version) return tl::unexpected(version.error());
  if (*version && **version != 1)
    return in.error_at((*root)["version"], fmt::format("expected version 1, found {}", **version));
  auto cluster = in.req_string(*root, "cluster");
  if (!cluster) return tl::unexpected(cluster.error());
  if (*cluster != c.name())
    return in.error_at((*root)["cluster"], fmt::format("state is for cluster '{}', not '{}'", *cluster, c.name()));
  auto gpus = in.opt_integer(*root, "gpus");
  if (!gpus) return tl::unexpected(gpus.error());
  if (*gpus && **gpus != static_cast<long>(c.gpu_count()))
    return in.error_at((*root)["gpus"],
                       fmt::format("state counts {} GPUs, cluster '{}' has {}", **gpus, c.name(), c.gpu_count()));
  AllocationState state(c);
  YAML::Node jobs = (*root)["jobs"];
  if (!jobs) return state;
  if (auto ok = in.expect_sequence(jobs, "jobs"); !ok) return tl::unexpected(ok.error());
  std::vector<GpuId> ids;
  for (const YAML::Node& job : jobs) {
    if (auto ok = in.expect_map(job, "job", {"id", "gpus"}); !ok) return tl::unexpected(ok.error());
    auto id = in.req_string(job, "id");
    if (!id) return tl::unexpected(id.error());
    if (id->empty()) return in.error_at(job["id"], "expected a non-empty job id");
    if (state.has_job(*id)) return in.error_at(job["id"], fmt::format("job '{}' appears twice", *id));
    YAML::Node list = job["gpus"];
    if (!list) return in.error_at(job, fmt::format("job '{}' has no 'gpus'", *id));
    if (auto ok = in.expect_sequence(list, "gpus"); !ok) return tl::unexpected(ok.error());
    if (list.size() == 0) return in.error_at(list, fmt::format("job '{}' has an empty GPU list", *id));
    ids.clear();
    for (const YAML::Node& g : list) {
      auto text_gpu = in.string(g, "gpu");
      if (!text_gpu) return tl::unexpected(text_gpu.error());
      std::string_view t = *text_gpu;
      auto colon = t.rfind(':');
      if (colon == std::string_view::npos || colon == 0 || colon + 1 == t.size())
        return in.error_at(g, fmt::format("expected a GPU as NODE:INDEX, found '{}'", t));
      auto node = c.find_node(t.substr(0, colon));
      if (!node) return in.error_at(g, fmt::format("no node named '{}' in cluster '{}'", t.substr(0, colon), c.name()));
      int index = -1;
      std::string_view num = t.substr(colon + 1);
      auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
      if (ec != std::errc() || ptr != num.data() + num.size() || index < 0 || index >= c.node_gpu_count(*node))
        return in.error_at(g, fmt::format("node '{}' has GPUs 0..{}, found '{}'", c.node_name(*node),
                                          c.node_gpu_count(*node) - 1, num));
      ids.push_back(c.node_gpu(*node, index));
    }
    if (auto ok = state.allocate(*id, ids); !ok) return in.error_at(list, ok.error().message);
  }
  return state;
}

Result<AllocationState> load_state_file(const Cluster& c, const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return tl::unexpected(text.error());
  return state_from_json(c, *text, path);
}

Result<void> save_state_file(const AllocationState& s, const std::string& path) {
  TOPOSCHED_TRY(text, state_to_json(s));
  return write_file_atomically(path, text);
}

Result<StateFileStore> StateFileStore::open(const Cluster& cluster, std::string load_path, std::string save_path) {
  if (load_path.empty()) return StateFileStore(AllocationState(cluster), std::move(save_path));
  TOPOSCHED_TRY(state, load_state_file(cluster, load_path));
  return StateFileStore(std::move(state), std::move(save_path));
}

Result<void> StateFileStore::commit(std::span<const Mutation> batch) {
  AllocationState next = state_;
  for (const Mutation& m : batch) {
    if (m.kind == Mutation::Kind::kMarkNode || m.kind == Mutation::Kind::kUnmarkNode)
      return make_error(ErrorCode::kUnsupported,
                        "a state file holds no node availability; `toposched serve` keeps it (PUT /v1/nodes/NAME/availability)");
    if (m.kind == Mutation::Kind::kPlace)
      TOPOSCHED_CHECK(next.allocate(m.job_id, m.gpus_by_rank, m.order));
    else
      TOPOSCHED_CHECK(next.release(m.job_id));
  }
  if (save_path_.empty()) return make_error(ErrorCode::kInvalidArgument, "no file to save the state to");
  TOPOSCHED_CHECK(save_state_file(next, save_path_));
  state_ = std::move(next);
  return {};
}

namespace {

// The directory a file lives in, its symbolic links (the file's too) resolved, so that two
// processes naming one file by different paths lock the same directory.
std::string lock_directory(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  if (ec) p = std::filesystem::absolute(path);
  return p.parent_path().string();
}

}  // namespace

Result<StateFileLock> StateFileLock::acquire(std::vector<std::string> paths) {
  std::erase(paths, std::string());
  std::vector<std::string> dirs;
  for (const std::string& path : paths) dirs.push_back(lock_directory(path));
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  StateFileLock lock;
  for (const std::string& dir : dirs) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
      return make_error(ErrorCode::kIo, fmt::format("{}: cannot open the directory to lock it: {}", dir, std::strerror(errno)));
    lock.fds_.push_back(fd);
    int rc;
    while ((rc = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (rc != 0) return make_error(ErrorCode::kIo, fmt::format("{}: cannot lock: {}", dir, std::strerror(errno)));
  }
  return lock;
}

StateFileLock::~StateFileLock() {
  for (int fd : fds_) ::close(fd);  // closing the descriptor releases its flock
}

}  // namespace toposched
