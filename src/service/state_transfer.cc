#include "service/state_transfer.h"

#include "placement/engine.h"
#include "placement/state_file.h"
#include "service/scheduler.h"

namespace toposched::service {

Result<std::size_t> import_state_file(const Cluster& cluster, Store& store, const std::string& state_path) {
  TOPOSCHED_TRY(state, load_state_file(cluster, state_path));
  TOPOSCHED_CHECK(store.bind_cluster(cluster));
  std::vector<Mutation> batch;
  for (const std::string& id : state.job_ids()) {
    Mutation m;
    m.kind = Mutation::Kind::kPlace;
    m.job_id = id;
    Placement p;
    p.job_id = id;
    p.policy = "imported";
    auto gpus = state.job_gpus(id);
    p.gpus_by_rank.assign(gpus.begin(), gpus.end());
    m.gpus_by_rank = p.gpus_by_rank;
    nlohmann::ordered_json request;
    request["job"] = id;
    request["gpus"] = gpus.size();
    request["policy"] = "imported";
    m.request_json = request.dump();
    m.answer_json = placement_to_json(cluster, p).dump();
    batch.push_back(std::move(m));
  }
  TOPOSCHED_CHECK(store.commit(batch));
  return batch.size();
}

Result<std::string> export_state(const Cluster& cluster, Store& store) {
  TOPOSCHED_CHECK(store.bind_cluster(cluster));
  Engine engine(cluster, AllocationState(cluster));
  TOPOSCHED_CHECK(restore_jobs(engine, store));
  return engine.read([](const AllocationState& s) { return state_to_json(s); });
}

}  // namespace toposched::service
