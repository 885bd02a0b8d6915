#include "service/store.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include "formats/native_spec.h"
#include "placement/engine.h"
#include "service/etcd_store.h"
#include "service/replica.h"
#include "service/sqlite_store.h"

namespace toposched::service {

namespace {
Result<std::unique_ptr<Store>> open_sqlite(std::string_view rest) {
  if (rest.empty()) return make_error(ErrorCode::kInvalidArgument, "store URL 'sqlite:' needs a path, e.g. sqlite:./toposched-state.db");
  return open_sqlite_store(std::string(rest));
}
}  // namespace

std::shared_ptr<Replica> Store::replicate(const ReplicaOptions&, Engine&) { return nullptr; }

Result<void> Store::check_bound() const {
  if (!cluster_)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{} store: commit before bind_cluster", kind()));
  return {};
}

std::string cluster_digest(const Cluster& cluster) {
  // A name that is not UTF-8 has no JSON form (formats/json_output.h); the YAML text
  // identifies the cluster just as well then.
  auto json = write_native_json_identity(cluster);
  std::string spec = json ? std::move(*json) : write_native_yaml(cluster);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(spec.data(), spec.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex = "sha256:";
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

JobRecord job_record(const Cluster& cluster, const Mutation& m, std::int64_t now_unix_ms) {
  JobRecord r;
  r.id = m.job_id;
  r.gpus_by_rank.reserve(m.gpus_by_rank.size());
  for (GpuId g : m.gpus_by_rank) r.gpus_by_rank.push_back(gpu_name(cluster, g));
  r.request_json = m.request_json;
  r.placement_json = m.answer_json;
  r.created_unix_ms = m.created_unix_ms ? m.created_unix_ms : now_unix_ms;
  return r;
}

NodeMarkRecord node_mark_record(const Cluster& cluster, const Mutation& m) {
  return NodeMarkRecord{cluster.node_name(m.node), m.mark.source, m.mark.reason, m.mark.since_unix_ms};
}

Result<std::vector<Mutation>> state_mutations(const Cluster& cluster, std::vector<JobRecord> jobs,
                                              std::vector<NodeMarkRecord> marks) {
  std::vector<Mutation> out;
  out.reserve(jobs.size() + marks.size());
  for (JobRecord& job : jobs) {
    Mutation m;
    m.kind = Mutation::Kind::kPlace;
    m.gpus_by_rank.reserve(job.gpus_by_rank.size());
    for (const std::string& name : job.gpus_by_rank) {
      auto g = parse_gpu(cluster, name);
      if (!g) return make_error(ErrorCode::kValidation, fmt::format("store job '{}': {}", job.id, g.error().message));
      m.gpus_by_rank.push_back(*g);
    }
    m.job_id = std::move(job.id);
    m.request_json = std::move(job.request_json);
    m.answer_json = std::move(job.placement_json);
    m.created_unix_ms = job.created_unix_ms;
    out.push_back(std::move(m));
  }
  for (NodeMarkRecord& r : marks) {
    auto node = cluster.find_node(r.node);
    if (!node)
      return make_error(ErrorCode::kValidation,
                        fmt::format("store node mark by '{}': no node named '{}' in cluster '{}'", r.source, r.node,
                                    cluster.name()));
    Mutation m;
    m.kind = Mutation::Kind::kMarkNode;
    m.node = *node;
    m.mark = NodeMark{std::move(r.source), std::move(r.reason), r.since_unix_ms};
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::vector<Mutation>> load_state(Store& store, const Cluster& cluster) {
  TOPOSCHED_TRY(jobs, store.load_jobs());
  TOPOSCHED_TRY(marks, store.load_node_marks());
  return state_mutations(cluster, std::move(jobs), std::move(marks));
}

// One row per store kind: the URL prefix, what it is, and how to open the rest of the URL.
// A new kind adds one row here (and its own file under src/service/).
const std::vector<StoreScheme>& store_schemes() {
  static const std::vector<StoreScheme> kSchemes = {
      {"sqlite:", "one SQLite file (WAL, synchronous=FULL): sqlite:PATH", open_sqlite},
      {"etcd://", "an etcd v3 cluster shared by replicas (HA): etcd://HOST:PORT[,HOST:PORT...][/PREFIX]", open_etcd_store},
  };
  return kSchemes;
}

Result<std::unique_ptr<Store>> open_store(std::string_view url) {
  for (const StoreScheme& s : store_schemes())
    if (url.starts_with(s.prefix)) return s.open(url.substr(s.prefix.size()));
  std::string known;
  for (const StoreScheme& s : store_schemes()) known += (known.empty() ? "" : "; ") + std::string(s.description);
  return make_error(ErrorCode::kInvalidArgument, fmt::format("unknown store URL '{}'; stores: {}", url, known));
}

}  // namespace toposched::service
