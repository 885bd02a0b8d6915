#include "k8s/extender_types.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "formats/json_input.h"
#include "k8s/go_json.h"
#include "topology/text.h"

namespace toposched::k8s {

namespace sj = simdjson::ondemand;

namespace {

// Decoding stops at the first problem with one of these; decode_body turns it into an Error.
struct DecodeFailure {
  std::string message;
  const char* where = nullptr;
};

std::string_view json_kind(sj::json_type t) {
  switch (t) {
    case sj::json_type::array: return "array";
    case sj::json_type::object: return "object";
    case sj::json_type::number: return "number";
    case sj::json_type::string: return "string";
    case sj::json_type::boolean: return "bool";
    case sj::json_type::null: return "null";
  }
  return "value";
}

const char* where_of(sj::value& v) {
  auto loc = v.current_location();
  return loc.error() ? nullptr : loc.value_unsafe();
}

[[noreturn]] void type_mismatch(sj::value& v, sj::json_type found, std::string_view field, std::string_view go_type) {
  throw DecodeFailure{fmt::format("json: cannot unmarshal {} into Go struct field {} of type {}", json_kind(found),
                                  field, go_type),
                      where_of(v)};
}

// Each reader follows Go: `null` leaves a string or integer unchanged and makes a pointer,
// slice or map nil; any other mismatch of JSON kind and Go type is an error.
void read_string(sj::value v, std::string& out, std::string_view field) {
  const sj::json_type t = v.type();
  if (t == sj::json_type::null) return;
  if (t != sj::json_type::string) type_mismatch(v, t, field, "string");
  out = std::string_view(v.get_string());
}

void read_int64(sj::value v, std::int64_t& out, std::string_view field) {
  const sj::json_type t = v.type();
  if (t == sj::json_type::null) return;
  if (t != sj::json_type::number) type_mismatch(v, t, field, "int64");
  auto n = v.get_int64();
  if (n.error()) throw DecodeFailure{fmt::format("json: cannot unmarshal number {} into Go struct field {} of type int64",
                                                 std::string_view(v.raw_json_token()), field),
                                     where_of(v)};
  out = n.value_unsafe();
}

void read_string_map(sj::value v, std::map<std::string, std::string>& out, std::string_view field) {
  const sj::json_type t = v.type();
  if (t == sj::json_type::null) {
    out.clear();
    return;
  }
  if (t != sj::json_type::object) type_mismatch(v, t, field, "map[string]string");
  for (auto kv : v.get_object()) {
    std::string key(std::string_view(kv.unescaped_key()));
    std::string value;
    read_string(kv.value(), value, field);
    out[std::move(key)] = std::move(value);
  }
}

std::optional<std::vector<std::string>> read_string_list(sj::value v, std::string_view field) {
  const sj::json_type t = v.type();
  if (t == sj::json_type::null) return std::nullopt;
  if (t != sj::json_type::array) type_mismatch(v, t, field, "[]string");
  std::vector<std::string> out;
  for (auto item : v.get_array()) {
    std::string s;
    read_string(item.value(), s, field);
    out.push_back(std::move(s));
  }
  return out;
}

// A quantity is a JSON string ("8") or, as resource.Quantity also accepts, a bare number.
void read_resources(sj::value v, ResourceList& out, std::string_view field) {
  const sj::json_type t = v.type();
  if (t == sj::json_type::null) {
    out.clear();
    return;
  }
  if (t != sj::json_type::object) type_mismatch(v, t, field, "v1.ResourceList");
  for (auto kv : v.get_object()) {
    std::string key(std::string_view(kv.unescaped_key()));
    sj::value q = kv.value();
    const sj::json_type qt = q.type();
    if (qt == sj::json_type::string) {
      out[key] = std::string(std::string_view(q.get_string()));
    } else if (qt == sj::json_type::number) {
      std::string_view tok = q.raw_json_token();
      while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t'))
        tok.remove_suffix(1);
      out[key] = std::string(tok);
    } else if (qt == sj::json_type::null) {
      out[key] = "0";
    } else {
      type_mismatch(q, qt, field, "resource.Quantity");
    }
  }
}

template <class Fn>
void for_fields(sj::value v, std::string_view go_type, Fn&& on_field) {
  const sj::json_type t = v.type();
  if (t == sj::json_type::null) return;
  if (t != sj::json_type::object)
    throw DecodeFailure{fmt::format("json: cannot unmarshal {} into Go value of type {}", json_kind(t), go_type),
                        where_of(v)};
  for (auto f : v.get_object()) {
    std::string_view key = f.unescaped_key();
    on_field(key, f.value());
  }
}

Container read_container(sj::value v) {
  Container c;
  for_fields(v, "v1.Container", [&](std::string_view k, sj::value fv) {
    if (go_key_matches(k, "name")) {
      read_string(fv, c.name, "Container.name");
    } else if (go_key_matches(k, "resources")) {
      for_fields(fv, "v1.ResourceRequirements", [&](std::string_view rk, sj::value rv) {
        if (go_key_matches(rk, "limits")) read_resources(rv, c.limits, "ResourceRequirements.limits");
        else if (go_key_matches(rk, "requests")) read_resources(rv, c.requests, "ResourceRequirements.requests");
      });
    }
  });
  return c;
}

std::vector<Container> read_containers(sj::value v, std::string_view field) {
  const sj::json_type t = v.type();
  if (t == sj::json_type::null) return {};
  if (t != sj::json_type::array) type_mismatch(v, t, field, "[]v1.Container");
  std::vector<Container> out;
  for (auto item : v.get_array()) out.push_back(read_container(item.value()));
  return out;
}

void read_pod_fields(sj::value v, Pod& pod) {
  for_fields(v, "v1.Pod", [&](std::string_view k, sj::value fv) {
    if (go_key_matches(k, "metadata")) {
      for_fields(fv, "v1.ObjectMeta", [&](std::string_view mk, sj::value mv) {
        if (go_key_matches(mk, "name")) read_string(mv, pod.name, "ObjectMeta.name");
        else if (go_key_matches(mk, "namespace")) read_string(mv, pod.namespace_name, "ObjectMeta.namespace");
        else if (go_key_matches(mk, "uid")) read_string(mv, pod.uid, "ObjectMeta.uid");
        else if (go_key_matches(mk, "labels")) read_string_map(mv, pod.labels, "ObjectMeta.labels");
        else if (go_key_matches(mk, "annotations")) read_string_map(mv, pod.annotations, "ObjectMeta.annotations");
      });
    } else if (go_key_matches(k, "spec")) {
      for_fields(fv, "v1.PodSpec", [&](std::string_view sk, sj::value sv) {
        if (go_key_matches(sk, "containers")) {
          pod.containers = read_containers(sv, "PodSpec.containers");
        } else if (go_key_matches(sk, "initContainers")) {
          pod.init_containers = read_containers(sv, "PodSpec.initContainers");
        } else if (go_key_matches(sk, "nodeName")) {
          read_string(sv, pod.node_name, "PodSpec.nodeName");
        } else if (go_key_matches(sk, "priority")) {
          if (sv.type() == sj::json_type::null) {
            pod.priority.reset();
          } else {
            std::int64_t p = 0;
            read_int64(sv, p, "PodSpec.priority");
            pod.priority = static_cast<std::int32_t>(p);
          }
        }
      });
    } else if (go_key_matches(k, "status")) {
      for_fields(fv, "v1.PodStatus", [&](std::string_view tk, sj::value tv) {
        if (go_key_matches(tk, "nominatedNodeName")) read_string(tv, pod.nominated_node_name, "PodStatus.nominatedNodeName");
      });
    }
  });
}

// A nested parser for objects kept verbatim: their raw text is re-read in place (the outer
// buffer is padded, so the slice may be iterated without a copy).
sj::parser& nested_parser() {
  thread_local sj::parser p;
  return p;
}

template <class Fn>
void reparse(std::string_view raw, Fn&& read) {
  sj::parser& p = nested_parser();
  sj::document doc = p.iterate(raw.data(), raw.size(), raw.size() + simdjson::SIMDJSON_PADDING);
  sj::value v = doc.get_value();
  read(v);
}

std::optional<Pod> read_pod(sj::value v) {
  if (v.type() == sj::json_type::null) return std::nullopt;
  if (v.type() != sj::json_type::object)
    throw DecodeFailure{fmt::format("json: cannot unmarshal {} into Go value of type v1.Pod", json_kind(v.type())),
                        where_of(v)};
  Pod pod;
  sj::object obj = v.get_object();
  pod.raw_json = std::string(std::string_view(obj.raw_json()));
  // Re-read from our own padded copy: raw_json() consumed the value.
  simdjson::padded_string copy(pod.raw_json);
  sj::parser& p = nested_parser();
  sj::document doc = p.iterate(copy);
  read_pod_fields(doc.get_value(), pod);
  return pod;
}

Node read_node(sj::value v) {
  Node node;
  if (v.type() == sj::json_type::null) return node;
  if (v.type() != sj::json_type::object)
    throw DecodeFailure{fmt::format("json: cannot unmarshal {} into Go value of type v1.Node", json_kind(v.type())),
                        where_of(v)};
  sj::object obj = v.get_object();
  std::string_view raw = obj.raw_json();
  node.raw_json = std::string(raw);
  reparse(raw, [&](sj::value nv) {
    for_fields(nv, "v1.Node", [&](std::string_view k, sj::value fv) {
      if (!go_key_matches(k, "metadata")) return;
      for_fields(fv, "v1.ObjectMeta", [&](std::string_view mk, sj::value mv) {
        if (go_key_matches(mk, "name")) read_string(mv, node.name, "ObjectMeta.name");
      });
    });
  });
  return node;
}

std::optional<NodeList> read_node_list(sj::value v) {
  if (v.type() == sj::json_type::null) return std::nullopt;
  NodeList list;
  for_fields(v, "v1.NodeList", [&](std::string_view k, sj::value fv) {
    if (!go_key_matches(k, "items")) return;
    const sj::json_type t = fv.type();
    list.items.clear();
    if (t == sj::json_type::null) return;
    if (t != sj::json_type::array) type_mismatch(fv, t, "NodeList.items", "[]v1.Node");
    for (auto item : fv.get_array()) list.items.push_back(read_node(item.value()));
  });
  return list;
}

MetaVictims read_meta_victims(sj::value v) {
  MetaVictims mv;
  for_fields(v, "v1.MetaVictims", [&](std::string_view k, sj::value fv) {
    if (go_key_matches(k, "Pods")) {
      mv.pods.clear();
      const sj::json_type t = fv.type();
      if (t == sj::json_type::null) return;
      if (t != sj::json_type::array) type_mismatch(fv, t, "MetaVictims.Pods", "[]*v1.MetaPod");
      for (auto item : fv.get_array()) {
        MetaPod mp;
        for_fields(item.value(), "v1.MetaPod", [&](std::string_view pk, sj::value pv) {
          if (go_key_matches(pk, "UID")) read_string(pv, mp.uid, "MetaPod.UID");
        });
        mv.pods.push_back(std::move(mp));
      }
    } else if (go_key_matches(k, "NumPDBViolations")) {
      read_int64(fv, mv.num_pdb_violations, "MetaVictims.NumPDBViolations");
    }
  });
  return mv;
}

Victims read_victims(sj::value v) {
  Victims vs;
  for_fields(v, "v1.Victims", [&](std::string_view k, sj::value fv) {
    if (go_key_matches(k, "Pods")) {
      vs.pods.clear();
      const sj::json_type t = fv.type();
      if (t == sj::json_type::null) return;
      if (t != sj::json_type::array) type_mismatch(fv, t, "Victims.Pods", "[]*v1.Pod");
      for (auto item : fv.get_array()) {
        auto pod = read_pod(item.value());
        vs.pods.push_back(pod ? std::move(*pod) : Pod{});
      }
    } else if (go_key_matches(k, "NumPDBViolations")) {
      read_int64(fv, vs.num_pdb_violations, "Victims.NumPDBViolations");
    }
  });
  return vs;
}

template <class T, class Fn>
std::optional<std::map<std::string, T>> read_object_map(sj::value v, std::optional<std::map<std::string, T>> prior,
                                                        std::string_view field, Fn&& read_value) {
  const sj::json_type t = v.type();
  if (t == sj::json_type::null) return std::nullopt;
  if (t != sj::json_type::object) type_mismatch(v, t, field, "map");
  auto out = prior ? std::move(prior) : std::optional<std::map<std::string, T>>(std::map<std::string, T>{});
  for (auto kv : v.get_object()) {
    std::string key(std::string_view(kv.unescaped_key()));
    (*out)[std::move(key)] = read_value(kv.value());
  }
  return out;
}

std::optional<FailedNodesMap> read_failed_nodes(sj::value v, std::optional<FailedNodesMap> prior,
                                                std::string_view field) {
  if (v.type() == sj::json_type::null) return std::nullopt;
  FailedNodesMap m = prior ? std::move(*prior) : FailedNodesMap{};
  read_string_map(v, m, field);
  return m;
}

// simdjson's syntax errors carry no position. Only on this failure path the strict reader
// parses the body again to name the line and column, as every other JSON reader does; when
// it finds nothing wrong (simdjson refuses a few things it accepts), simdjson's words stay.
Error located_syntax_error(std::string_view body, const simdjson::simdjson_error& e) {
  auto strict = parse_json_document(body, "request body");
  if (!strict) return strict.error();
  return Error{ErrorCode::kParse, fmt::format("malformed JSON: {}", e.what()), SourceLocation{"request body", 0, 0}};
}

// Runs `read` on the body's single value; Go's json.Unmarshal rejects trailing data.
template <class T, class Fn>
Result<T> decode_body(std::string_view body, Fn&& read) {
  thread_local sj::parser parser;
  simdjson::padded_string padded(body);
  T out{};
  const char* base = padded.data();
  try {
    sj::document doc = parser.iterate(padded);
    sj::value v = doc.get_value();
    read(v, out);
    // A location left after the value means trailing data (at the end there is none).
    if (auto loc = doc.current_location(); !loc.error())
      throw DecodeFailure{"invalid character after top-level value", loc.value_unsafe()};
  } catch (const DecodeFailure& f) {
    const std::size_t off = f.where ? static_cast<std::size_t>(f.where - base) : 0;
    return make_error(ErrorCode::kParse, f.message, location_of(body, off, "request body"));
  } catch (const simdjson::simdjson_error& e) {
    return tl::unexpected(located_syntax_error(body, e));
  }
  return out;
}

}  // namespace

Result<ExtenderArgs> decode_extender_args(std::string_view body) {
  return decode_body<ExtenderArgs>(body, [](sj::value v, ExtenderArgs& a) {
    for_fields(v, "v1.ExtenderArgs", [&](std::string_view k, sj::value fv) {
      if (go_key_matches(k, "Pod")) a.pod = read_pod(fv);
      else if (go_key_matches(k, "Nodes")) a.nodes = read_node_list(fv);
      else if (go_key_matches(k, "NodeNames")) a.node_names = read_string_list(fv, "ExtenderArgs.NodeNames");
    });
  });
}

Result<ExtenderFilterResult> decode_filter_result(std::string_view body) {
  return decode_body<ExtenderFilterResult>(body, [](sj::value v, ExtenderFilterResult& r) {
    for_fields(v, "v1.ExtenderFilterResult", [&](std::string_view k, sj::value fv) {
      if (go_key_matches(k, "Nodes")) r.nodes = read_node_list(fv);
      else if (go_key_matches(k, "NodeNames")) r.node_names = read_string_list(fv, "ExtenderFilterResult.NodeNames");
      else if (go_key_matches(k, "FailedNodes"))
        r.failed_nodes = read_failed_nodes(fv, std::move(r.failed_nodes), "ExtenderFilterResult.FailedNodes");
      else if (go_key_matches(k, "FailedAndUnresolvableNodes"))
        r.failed_and_unresolvable_nodes = read_failed_nodes(fv, std::move(r.failed_and_unresolvable_nodes),
                                                            "ExtenderFilterResult.FailedAndUnresolvableNodes");
      else if (go_key_matches(k, "Error")) read_string(fv, r.error, "ExtenderFilterResult.Error");
    });
  });
}

Result<ExtenderBindingArgs> decode_binding_args(std::string_view body) {
  return decode_body<ExtenderBindingArgs>(body, [](sj::value v, ExtenderBindingArgs& a) {
    for_fields(v, "v1.ExtenderBindingArgs", [&](std::string_view k, sj::value fv) {
      if (go_key_matches(k, "PodName")) read_string(fv, a.pod_name, "ExtenderBindingArgs.PodName");
      else if (go_key_matches(k, "PodNamespace")) read_string(fv, a.pod_namespace, "ExtenderBindingArgs.PodNamespace");
      else if (go_key_matches(k, "PodUID")) read_string(fv, a.pod_uid, "ExtenderBindingArgs.PodUID");
      else if (go_key_matches(k, "Node")) read_string(fv, a.node, "ExtenderBindingArgs.Node");
    });
  });
}

Result<ExtenderBindingResult> decode_binding_result(std::string_view body) {
  return decode_body<ExtenderBindingResult>(body, [](sj::value v, ExtenderBindingResult& r) {
    for_fields(v, "v1.ExtenderBindingResult", [&](std::string_view k, sj::value fv) {
      if (go_key_matches(k, "Error")) read_string(fv, r.error, "ExtenderBindingResult.Error");
    });
  });
}

namespace {
void read_host_priority(sj::value v, HostPriority& h) {
  for_fields(v, "v1.HostPriority", [&](std::string_view k, sj::value fv) {
    if (go_key_matches(k, "Host")) read_string(fv, h.host, "HostPriority.Host");
    else if (go_key_matches(k, "Score")) read_int64(fv, h.score, "HostPriority.Score");
  });
}
}  // namespace

Result<HostPriority> decode_host_priority(std::string_view body) {
  return decode_body<HostPriority>(body, [](sj::value v, HostPriority& h) { read_host_priority(v, h); });
}

Result<HostPriorityList> decode_host_priority_list(std::string_view body) {
  return decode_body<HostPriorityList>(body, [](sj::value v, HostPriorityList& list) {
    const sj::json_type t = v.type();
    if (t == sj::json_type::null) return;
    if (t != sj::json_type::array)
      throw DecodeFailure{fmt::format("json: cannot unmarshal {} into Go value of type v1.HostPriorityList",
                                      json_kind(t)),
                          where_of(v)};
    list.emplace();
    for (auto item : v.get_array()) {
      HostPriority h;
      read_host_priority(item.value(), h);
      list->push_back(std::move(h));
    }
  });
}

Result<ExtenderPreemptionArgs> decode_preemption_args(std::string_view body) {
  return decode_body<ExtenderPreemptionArgs>(body, [](sj::value v, ExtenderPreemptionArgs& a) {
    for_fields(v, "v1.ExtenderPreemptionArgs", [&](std::string_view k, sj::value fv) {
      if (go_key_matches(k, "Pod")) {
        a.pod = read_pod(fv);
      } else if (go_key_matches(k, "NodeNameToVictims")) {
        a.node_name_to_victims = read_object_map<Victims>(fv, std::move(a.node_name_to_victims),
                                                          "ExtenderPreemptionArgs.NodeNameToVictims", read_victims);
      } else if (go_key_matches(k, "NodeNameToMetaVictims")) {
        a.node_name_to_meta_victims = read_object_map<MetaVictims>(
            fv, std::move(a.node_name_to_meta_victims), "ExtenderPreemptionArgs.NodeNameToMetaVictims",
            read_meta_victims);
      }
    });
  });
}

Result<ExtenderPreemptionResult> decode_preemption_result(std::string_view body) {
  return decode_body<ExtenderPreemptionResult>(body, [](sj::value v, ExtenderPreemptionResult& r) {
    for_fields(v, "v1.ExtenderPreemptionResult", [&](std::string_view k, sj::value fv) {
      if (go_key_matches(k, "NodeNameToMetaVictims"))
        r.node_name_to_meta_victims = read_object_map<MetaVictims>(
            fv, std::move(r.node_name_to_meta_victims), "ExtenderPreemptionResult.NodeNameToMetaVictims",
            read_meta_victims);
    });
  });
}

Result<Pod> decode_pod(std::string_view body) {
  return decode_body<Pod>(body, [](sj::value v, Pod& p) {
    if (auto pod = read_pod(v)) p = std::move(*pod);
  });
}

// ---- encoding ----

namespace {

void write_string_map(GoJsonWriter& w, const std::map<std::string, std::string>& m) {
  w.begin_object();
  for (const auto& [k, v] : m) {
    w.key(k);
    w.string(v);
  }
  w.end_object();
}

void write_containers(GoJsonWriter& w, const std::vector<Container>& cs) {
  w.begin_array();
  for (const Container& c : cs) {
    w.begin_object();
    w.key("name");
    w.string(c.name);
    w.key("resources");
    w.begin_object();
    if (!c.limits.empty()) {
      w.key("limits");
      write_string_map(w, c.limits);
    }
    if (!c.requests.empty()) {
      w.key("requests");
      write_string_map(w, c.requests);
    }
    w.end_object();
    w.end_object();
  }
  w.end_array();
}

// ObjectMeta with Go's field order and omitempty.
void write_meta(GoJsonWriter& w, std::string_view name, std::string_view ns, std::string_view uid,
                const StringMap& labels, const StringMap& annotations) {
  w.begin_object();
  if (!name.empty()) { w.key("name"); w.string(name); }
  if (!ns.empty()) { w.key("namespace"); w.string(ns); }
  if (!uid.empty()) { w.key("uid"); w.string(uid); }
  if (!labels.empty()) { w.key("labels"); write_string_map(w, labels); }
  if (!annotations.empty()) { w.key("annotations"); write_string_map(w, annotations); }
  w.end_object();
}

void write_pod(GoJsonWriter& w, const Pod& p) {
  if (!p.raw_json.empty()) {
    w.raw(p.raw_json);
    return;
  }
  w.begin_object();
  w.key("metadata");
  write_meta(w, p.name, p.namespace_name, p.uid, p.labels, p.annotations);
  w.key("spec");
  w.begin_object();
  if (!p.init_containers.empty()) {
    w.key("initContainers");
    write_containers(w, p.init_containers);
  }
  w.key("containers");
  if (p.containers.empty()) w.null();
  else write_containers(w, p.containers);
  if (!p.node_name.empty()) { w.key("nodeName"); w.string(p.node_name); }
  if (p.priority) { w.key("priority"); w.int64(*p.priority); }
  w.end_object();
  w.key("status");
  w.begin_object();
  if (!p.nominated_node_name.empty()) { w.key("nominatedNodeName"); w.string(p.nominated_node_name); }
  w.end_object();
  w.end_object();
}

// The zero-valued fields Go writes for a Node (no omitempty on these).
constexpr std::string_view kZeroNodeFields =
    R"("spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"",)"
    R"("systemUUID":"","bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"",)"
    R"("kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"","architecture":""}})";

void write_node(GoJsonWriter& w, const Node& n) {
  if (!n.raw_json.empty()) {
    w.raw(n.raw_json);
    return;
  }
  w.begin_object();
  w.key("metadata");
  write_meta(w, n.name, {}, {}, {}, {});
  w.raw(kZeroNodeFields);
  w.end_object();
}

void write_node_list(GoJsonWriter& w, const std::optional<NodeList>& l) {
  if (!l) {
    w.null();
    return;
  }
  w.begin_object();
  w.key("metadata");
  w.begin_object();
  w.end_object();
  w.key("items");
  if (l->items.empty()) {
    w.null();
  } else {
    w.begin_array();
    for (const Node& n : l->items) write_node(w, n);
    w.end_array();
  }
  w.end_object();
}

void write_names(GoJsonWriter& w, const std::optional<std::vector<std::string>>& names) {
  if (!names) {
    w.null();
    return;
  }
  w.begin_array();
  for (const auto& n : *names) w.string(n);
  w.end_array();
}

void write_failed(GoJsonWriter& w, const std::optional<FailedNodesMap>& m) {
  if (!m) w.null();
  else write_string_map(w, *m);
}

void write_meta_victims(GoJsonWriter& w, const MetaVictims& mv) {
  w.begin_object();
  w.key("Pods");
  if (mv.pods.empty()) {
    w.null();
  } else {
    w.begin_array();
    for (const MetaPod& p : mv.pods) {
      w.begin_object();
      w.key("UID");
      w.string(p.uid);
      w.end_object();
    }
    w.end_array();
  }
  w.key("NumPDBViolations");
  w.int64(mv.num_pdb_violations);
  w.end_object();
}

void write_meta_victims_map(GoJsonWriter& w, const std::optional<std::map<std::string, MetaVictims>>& m) {
  if (!m) {
    w.null();
    return;
  }
  w.begin_object();
  for (const auto& [node, mv] : *m) {
    w.key(node);
    write_meta_victims(w, mv);
  }
  w.end_object();
}

}  // namespace

std::string encode(const Pod& v) {
  GoJsonWriter w;
  write_pod(w, v);
  return w.take();
}

std::string encode(const Node& v) {
  GoJsonWriter w;
  write_node(w, v);
  return w.take();
}

std::string encode(const ExtenderArgs& v) {
  GoJsonWriter w;
  w.begin_object();
  w.key("Pod");
  if (v.pod) write_pod(w, *v.pod);
  else w.null();
  w.key("Nodes");
  write_node_list(w, v.nodes);
  w.key("NodeNames");
  write_names(w, v.node_names);
  w.end_object();
  return w.take();
}

std::string encode(const ExtenderFilterResult& v) {
  GoJsonWriter w;
  std::size_t guess = 128;
  if (v.failed_nodes) guess += v.failed_nodes->size() * 64;
  if (v.failed_and_unresolvable_nodes) guess += v.failed_and_unresolvable_nodes->size() * 64;
  w.reserve(guess);
  w.begin_object();
  w.key("Nodes");
  write_node_list(w, v.nodes);
  w.key("NodeNames");
  write_names(w, v.node_names);
  w.key("FailedNodes");
  write_failed(w, v.failed_nodes);
  w.key("FailedAndUnresolvableNodes");
  write_failed(w, v.failed_and_unresolvable_nodes);
  w.key("Error");
  w.string(v.error);
  w.end_object();
  return w.take();
}

std::string encode(const ExtenderBindingArgs& v) {
  GoJsonWriter w;
  w.begin_object();
  w.key("PodName");
  w.string(v.pod_name);
  w.key("PodNamespace");
  w.string(v.pod_namespace);
  w.key("PodUID");
  w.string(v.pod_uid);
  w.key("Node");
  w.string(v.node);
  w.end_object();
  return w.take();
}

std::string encode(const ExtenderBindingResult& v) {
  GoJsonWriter w;
  w.begin_object();
  w.key("Error");
  w.string(v.error);
  w.end_object();
  return w.take();
}

std::string encode(const HostPriority& v) {
  GoJsonWriter w;
  w.begin_object();
  w.key("Host");
  w.string(v.host);
  w.key("Score");
  w.int64(v.score);
  w.end_object();
  return w.take();
}

std::string encode(const HostPriorityList& v) {
  GoJsonWriter w;
  if (!v) {
    w.null();
    return w.take();
  }
  w.begin_array();
  for (const HostPriority& h : *v) {
    w.begin_object();
    w.key("Host");
    w.string(h.host);
    w.key("Score");
    w.int64(h.score);
    w.end_object();
  }
  w.end_array();
  return w.take();
}

std::string encode(const ExtenderPreemptionArgs& v) {
  GoJsonWriter w;
  w.begin_object();
  w.key("Pod");
  if (v.pod) write_pod(w, *v.pod);
  else w.null();
  w.key("NodeNameToVictims");
  if (!v.node_name_to_victims) {
    w.null();
  } else {
    w.begin_object();
    for (const auto& [node, vs] : *v.node_name_to_victims) {
      w.key(node);
      w.begin_object();
      w.key("Pods");
      if (vs.pods.empty()) {
        w.null();
      } else {
        w.begin_array();
        for (const Pod& p : vs.pods) write_pod(w, p);
        w.end_array();
      }
      w.key("NumPDBViolations");
      w.int64(vs.num_pdb_violations);
      w.end_object();
    }
    w.end_object();
  }
  w.key("NodeNameToMetaVictims");
  write_meta_victims_map(w, v.node_name_to_meta_victims);
  w.end_object();
  return w.take();
}

std::string encode(const ExtenderPreemptionResult& v) {
  GoJsonWriter w;
  w.begin_object();
  w.key("NodeNameToMetaVictims");
  write_meta_victims_map(w, v.node_name_to_meta_victims);
  w.end_object();
  return w.take();
}

}  // namespace toposched::k8s
