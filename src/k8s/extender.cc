#include "k8s/extender.h"

#include <nlohmann/json.hpp>

namespace toposched::k8s {

namespace {

ExtenderReply bad_request(const Error& e) {
  nlohmann::json j = {{"error", {{"code", "invalid_argument"}, {"message", e.to_string()}}}};
  return {400, j.dump()};
}

}  // namespace

ExtenderReply Extender::filter(std::string_view body) {
  auto args = decode_extender_args(body);
  if (!args) {
    ExtenderFilterResult r;
    r.error = "toposched: " + args.error().to_string();
    return {200, encode(r)};
  }
  return {200, encode(planner_.filter(*args))};
}

ExtenderReply Extender::prioritize(std::string_view body) {
  auto args = decode_extender_args(body);
  if (!args) return bad_request(args.error());
  return {200, encode(planner_.prioritize(*args))};
}

ExtenderReply Extender::preempt(std::string_view body) {
  auto args = decode_preemption_args(body);
  if (!args) return bad_request(args.error());
  return {200, encode(planner_.preempt(*args))};
}

ExtenderReply Extender::bind(std::string_view body) {
  ExtenderBindingResult result;
  auto args = decode_binding_args(body);
  if (!args) {
    result.error = "toposched: " + args.error().to_string();
    return {200, encode(result)};
  }
  if (args->pod_name.empty() || args->pod_namespace.empty() || args->node.empty()) {
    result.error = "toposched: a binding needs PodName, PodNamespace and Node";
    return {200, encode(result)};
  }
  auto plan = planner_.prepare_bind(*args);
  if (!plan) {
    result.error = plan.error().message;
    return {200, encode(result)};
  }
  if (!api_) {
    result.error = "toposched: no API server to bind with (give --k8s-api, or run in a cluster)";
    return {200, encode(result)};
  }
  auto posted = api_->bind(*plan);
  planner_.finish_bind(*plan, posted.has_value());
  if (!posted) result.error = "toposched: " + posted.error().message;
  return {200, encode(result)};
}

const std::vector<ExtenderVerb>& extender_verbs() {
  static const std::vector<ExtenderVerb> kVerbs = {
      {"filter", "ExtenderArgs -> ExtenderFilterResult: the pod's planned node only", &Extender::filter},
      {"prioritize", "ExtenderArgs -> HostPriorityList: 10 for the planned node, 0 elsewhere", &Extender::prioritize},
      {"bind", "ExtenderBindingArgs -> ExtenderBindingResult: posts the Binding with toposched.io/gpus",
       &Extender::bind},
      {"preempt", "ExtenderPreemptionArgs -> ExtenderPreemptionResult: victims freeing a whole placement",
       &Extender::preempt},
  };
  return kVerbs;
}

}  // namespace toposched::k8s
