// Component: one part of `toposched serve` beside the scheduler, with its own options, the
// work it runs in the background and its endpoints: the HA front, the Kubernetes extender,
// the Slurm sync, the Topograph request queue, the LLM router, and the plain endpoint groups
// (health, jobs, nodes, cluster), which only route.
//
// Lifecycle (Service, service/server.h): the table below is walked in order; a row's make()
// returns the component, or nullptr when its options leave it off; start() runs right
// after (it may submit to the scheduler, which runs: the router holds its replicas' GPUs
// there). Once every component started, install() registers the endpoints. stop() runs in
// reverse order after the listeners closed and the last request ended, before the
// scheduler stops.
//
// Invariants: install() only registers handlers (no thread starts, nothing is decided), so
// the order of the rows is the start order and nothing else: no endpoint depends on being
// registered first. Everything a component runs in the background has ended when stop()
// returns; stop() is called once, also when a later component failed to start.
//
// Thread-safety: make(), start(), install() and stop() run on the thread that opens and
// stops the service; the handlers they register run on the server's worker threads and
// may only use what is thread-safe (ServiceContext's members, the component's own state
// under its own lock).
//
// Adding a front end: one file under src/service/ with a Component subclass and its make
// function, one row in components.cc, its options struct in ServeOptions and its flags in
// cli/cmd_serve.cc (docs/service.md, "For developers").
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "service/server.h"

namespace toposched::service {

// Where a component registers its endpoints.
struct Endpoints {
  httplib::Server& api;       // --listen
  httplib::Server& extender;  // --extender-listen's listener; `api` without that flag
  std::vector<PreRoutingHook>& pre_routing;  // steps run before routing, after framing and token checks
};

class Component {
 public:
  virtual ~Component() = default;
  // Starts the background work (threads, subscriptions, holds). An error stops the opening
  // of the service: `serve` exits with it.
  virtual Result<void> start() { return {}; }
  virtual void install(Endpoints& endpoints) = 0;
  virtual void stop() {}
};

struct ComponentKind {
  std::string_view name;
  std::string_view summary;
  // The component, or nullptr when its options leave it off.
  std::unique_ptr<Component> (*make)(ServiceContext& ctx);
};

// Every component, in start order (components.cc).
const std::vector<ComponentKind>& component_kinds();

// A component that only registers endpoints (the plain groups).
using InstallFn = void (*)(httplib::Server& api, ServiceContext& ctx);
std::unique_ptr<Component> routes_only(ServiceContext& ctx, InstallFn install);

// The plain endpoint groups' installers, one file each.
void install_health_routes(httplib::Server& api, ServiceContext& ctx);   // health_routes.cc
void install_job_routes(httplib::Server& api, ServiceContext& ctx);      // job_routes.cc
void install_node_routes(httplib::Server& api, ServiceContext& ctx);     // node_routes.cc
void install_cluster_routes(httplib::Server& api, ServiceContext& ctx);  // cluster_routes.cc

// The components with a lifetime, one file each.
std::unique_ptr<Component> make_ha_front(ServiceContext& ctx);         // ha_routes.cc
std::unique_ptr<Component> make_topograph_queue(ServiceContext& ctx);  // topograph_routes.cc
std::unique_ptr<Component> make_router(ServiceContext& ctx);           // router_routes.cc
std::unique_ptr<Component> make_slurm_sync(ServiceContext& ctx);       // slurm_sync.cc
std::unique_ptr<Component> make_k8s_extender(ServiceContext& ctx);     // k8s_routes.cc

}  // namespace toposched::service
