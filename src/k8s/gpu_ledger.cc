#include "k8s/gpu_ledger.h"

#include <fmt/format.h>

namespace toposched::k8s {

EngineLedger::EngineLedger(const Engine& engine, Submit submit) : engine_(&engine), submit_(std::move(submit)) {}

EngineLedger::EngineLedger(const Cluster& cluster)
    : own_(std::make_unique<Engine>(cluster, AllocationState(cluster))), engine_(own_.get()) {
  submit_ = [engine = own_.get()](Command command) { return engine->decide_one(command, CommitFn{}); };
}

namespace {

// A place command for the extender, which reads only the GPUs.
Command gpus_only_place(const JobRequest& request, std::string_view policy) {
  Command command;
  command.kind = Command::Kind::kPlace;
  command.place.job = request;
  command.place.policy = std::string(policy);
  command.detail = PlaceDetail::kGpusOnly;
  // kube-scheduler offers only nodes its own filters pass (cordon, taints, NotReady), and
  // learns of a healed node at the same moment as the lifecycle controller: its offer, not
  // the controller's mark that may lag it, decides for Kubernetes' facts.
  command.caller_judges_source = std::string(kKubernetesSource);
  return command;
}

Placement placement_of(Decision decision, std::string_view policy) {
  Placement p;
  p.job_id = std::move(decision.job_id);
  p.policy = std::string(policy);
  p.gpus_by_rank = std::move(decision.gpus_by_rank);
  return p;
}

}  // namespace

Result<Placement> EngineLedger::reserve(const JobRequest& request, std::string_view policy, const NodeMask& allowed) {
  Command command = gpus_only_place(request, policy);
  command.place.allowed = allowed;
  TOPOSCHED_TRY(decision, submit_(std::move(command)));
  return placement_of(std::move(decision), policy);
}

Result<Placement> EngineLedger::what_if(const JobRequest& request, std::string_view policy,
                                        std::vector<std::string> released) const {
  Command command = gpus_only_place(request, policy);
  command.dry_run = true;  // nothing held, nothing committed
  command.assume_released = std::move(released);
  TOPOSCHED_TRY(decision, submit_(std::move(command)));
  return placement_of(std::move(decision), policy);
}

Result<std::string> EngineLedger::dry_run(const JobRequest& request, std::string_view policy,
                                          const NodeMask& allowed) const {
  Command command = gpus_only_place(request, policy);
  command.detail = PlaceDetail::kFull;  // the caller reads the predicted communication time
  command.dry_run = true;
  command.place.allowed = allowed;
  TOPOSCHED_TRY(decision, submit_(std::move(command)));
  return std::move(decision.answer_json);
}

Result<void> EngineLedger::release(std::string_view job_id) {
  Command command;
  command.kind = Command::Kind::kRelease;
  command.job_id = std::string(job_id);
  TOPOSCHED_TRY(decision, submit_(std::move(command)));
  (void)decision;
  return {};
}

AllocationState EngineLedger::snapshot() const {
  return engine_->read([](const AllocationState& s) { return s.snapshot(); });
}

bool EngineLedger::holds(std::string_view job_id) const {
  return engine_->read([&](const AllocationState& s) { return s.has_job(job_id); });
}

}  // namespace toposched::k8s
