#include "k8s/extender.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace toposched::k8s {

namespace {

ExtenderReply bad_request(const Error& e) {
  nlohmann::json j = {{"error", {{"code", "invalid_argument"}, {"message", e.to_string()}}}};
  return {400, j.dump()};
}

// A dry run that places nothing: 422 when the group does not fit (or its job id is taken:
// 409), 400 for what the caller must change.
ExtenderReply not_placed(const Error& e) {
  if (e.code == ErrorCode::kInfeasible || e.code == ErrorCode::kConflict) {
    const bool infeasible = e.code == ErrorCode::kInfeasible;
    nlohmann::json j = {{"error", {{"code", infeasible ? "infeasible" : "conflict"}, {"message", e.message}}}};
    return {infeasible ? 422 : 409, j.dump()};
  }
  return bad_request(e);
}

}  // namespace

ExtenderFilterResult Extender::filter_decoded(const Result<ExtenderArgs>& args) {
  if (!args) {
    ExtenderFilterResult r;
    r.error = "toposched: " + args.error().to_string();
    return r;
  }
  return planner_.filter(*args);
}

ExtenderReply Extender::filter(std::string_view body) { return {200, encode(filter_decoded(decode_extender_args(body)))}; }

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

namespace {
// The pod a plugin verb is about: ExtenderBindingArgs with PodName and PodNamespace.
Result<ExtenderBindingArgs> plugin_pod(std::string_view body) {
  TOPOSCHED_TRY(args, decode_binding_args(body));
  if (args.pod_name.empty() || args.pod_namespace.empty())
    return make_error(ErrorCode::kInvalidArgument, "the body needs PodName and PodNamespace (ExtenderBindingArgs)");
  return args;
}

nlohmann::json member_json(const MemberStatus& m) {
  return {{"job", m.job_id}, {"size", m.size}, {"bound", m.bound}, {"slot", m.slot}, {"node", m.node}, {"gpus", m.gpus}};
}
}  // namespace

ExtenderReply Extender::member(std::string_view body) {
  auto args = plugin_pod(body);
  if (!args) return bad_request(args.error());
  auto m = planner_.member_of(*args);
  if (!m) return {404, nlohmann::json{{"error", {{"code", "not_found"}, {"message", m.error().message}}}}.dump()};
  return {200, member_json(*m).dump()};
}

ExtenderReply Extender::plan(std::string_view body) {
  auto args = decode_extender_args(body);  // once: the pod and up to every node's name
  const std::string filtered = encode(filter_decoded(args));
  std::string member = "null";
  if (args && args->pod) {
    const Pod& pod = *args->pod;
    if (auto m = planner_.member_of({pod.name, pod.namespace_name, pod.uid, ""}); m) member = member_json(*m).dump();
  }
  return {200, fmt::format(R"({{"Filter":{},"Member":{}}})", filtered, member)};
}

ExtenderReply Extender::dry_run(std::string_view body) {
  auto args = decode_extender_args(body);
  if (!args) return bad_request(args.error());
  auto placed = planner_.dry_run(*args);
  if (!placed) return not_placed(placed.error());
  return {200, std::move(*placed)};
}

ExtenderReply Extender::unreserve(std::string_view body) {
  auto args = plugin_pod(body);
  if (!args) return bad_request(args.error());
  return {200, nlohmann::json{{"released", planner_.unreserve(*args)}}.dump()};
}

const std::vector<ExtenderVerb>& extender_verbs() {
  static const std::vector<ExtenderVerb> kVerbs = {
      {"filter", "ExtenderArgs -> ExtenderFilterResult: the pod's planned node only", &Extender::filter},
      {"prioritize", "ExtenderArgs -> HostPriorityList: 10 for the planned node, 0 elsewhere", &Extender::prioritize},
      {"bind", "ExtenderBindingArgs -> ExtenderBindingResult: posts the Binding with toposched.io/gpus",
       &Extender::bind},
      {"preempt", "ExtenderPreemptionArgs -> ExtenderPreemptionResult: victims freeing a whole placement",
       &Extender::preempt},
      {"plan", "ExtenderArgs -> {Filter, Member}: filter and member in one call (plugin build)", &Extender::plan},
      {"member", "ExtenderBindingArgs -> {job,size,bound,slot,node,gpus}: the pod's planned group (plugin build)",
       &Extender::member},
      {"unreserve", "ExtenderBindingArgs -> {released}: frees what a failed attempt held (plugin build)",
       &Extender::unreserve},
      {"dry-run", "ExtenderArgs -> the group's place JSON within NodeNames, nothing held (plugin build)",
       &Extender::dry_run},
  };
  return kVerbs;
}

}  // namespace toposched::k8s
