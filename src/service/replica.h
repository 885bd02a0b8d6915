// Replica: what a store shared by several `toposched serve` replicas gives the service: a
// gate on every batch of decisions (only the leader decides, on a current copy), the role
// and the leader's address for /readyz and for refusing mutations with 503. A store that
// one server uses alone (SQLite) has none: Store::replicate() answers nullptr.
//
// Thread-safety: enter() from the scheduler's writer thread; leads(), leader(), refusal()
// and status_json() from any thread.
#pragma once

#include <chrono>
#include <string>

#include "service/scheduler.h"
#include "topology/error.h"

namespace toposched::service {

struct ReplicaOptions {
  std::string advertise;  // this replica's address, as followers report the leader
  std::chrono::seconds lease_ttl{3};  // serve's --lease-ttl default
};

class Replica : public BatchGate {
 public:
  virtual bool leads() const = 0;
  // The leader's address as last seen (empty: none known).
  virtual std::string leader() const = 0;
  // Why mutations are refused here (not the leader; no leader known, with the store's error).
  virtual Error refusal() const = 0;
  // {"role","leader",...} for GET /readyz.
  virtual std::string status_json() const = 0;
};

}  // namespace toposched::service
