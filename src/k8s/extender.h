// The extender's four verbs as body-in, body-out functions: each decodes the request (Go's
// JSON rules, extender_types.h), asks the GangPlanner, and encodes the answer. The service's
// HTTP handlers only route `POST {prefix}/<verb>` here.
//
// Answers to bad requests (docs/kubernetes.md): filter and bind answer 200 with the `Error`
// field set (kube-scheduler shows it in the pod's events and retries the pod); prioritize
// and preempt, whose types have no Error field, answer 400 with {"error":{code,message}}
// (kube-scheduler ignores a failed prioritize and skips a failed preempt).
// Thread-safe (the planner serialises decisions; bind posts outside its lock).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/api_client.h"
#include "k8s/gang_planner.h"

namespace toposched::k8s {

struct ExtenderReply {
  int status = 200;
  std::string body;  // JSON
};

class Extender {
 public:
  // `api` empty: bind answers an Error (no API server to post to).
  Extender(GangPlanner& planner, std::optional<BindingClient> api) : planner_(planner), api_(std::move(api)) {}

  ExtenderReply filter(std::string_view body);
  ExtenderReply prioritize(std::string_view body);
  ExtenderReply bind(std::string_view body);
  ExtenderReply preempt(std::string_view body);
  // The plugin build's verbs (kube/scheduler; not kube-scheduler extender verbs), both
  // taking ExtenderBindingArgs: `member` answers the pod's group as planned
  // ({"job","size","bound","slot","node"}; 404 when toposched holds no slot for it),
  // `unreserve` gives back what the pod's failed attempt held ({"released": job or ""}).
  ExtenderReply member(std::string_view body);
  // `plan`: filter and member in one call, for the plugin's PreFilter (one round trip in
  // kube-scheduler's serial scheduling cycle): ExtenderArgs -> {"Filter": ExtenderFilterResult,
  // "Member": {job,size,bound,slot,node} or null when the pod got no node or has no GPUs}.
  ExtenderReply plan(std::string_view body);
  ExtenderReply unreserve(std::string_view body);
  // `dry-run`: ExtenderArgs (the pod as PreFilter sends it, and one candidate's nodes) -> the
  // `place` JSON of the pod's whole group planned within those nodes, holding nothing
  // (GangPlanner::dry_run); 422 {"error"} when it does not fit there, 400 for a bad body or
  // pod. The plugin's GeneratePlacements ranks candidates by its predicted_comm_us.
  ExtenderReply dry_run(std::string_view body);

  GangPlanner& planner() { return planner_; }

 private:
  // filter's answer for a decoded (or undecodable) body: shared by filter and plan.
  ExtenderFilterResult filter_decoded(const Result<ExtenderArgs>& args);

  GangPlanner& planner_;
  std::optional<BindingClient> api_;
};

struct ExtenderVerb {
  std::string_view name;     // the path segment after the prefix, as in KubeSchedulerConfiguration
  std::string_view summary;
  ExtenderReply (Extender::*handle)(std::string_view body);
};

// filter, prioritize, bind, preempt; plan, member, unreserve and dry-run (the plugin build's).
const std::vector<ExtenderVerb>& extender_verbs();

}  // namespace toposched::k8s
