// The model the placement policies score with, when it differs from the simulator's ground
// truth (`toposched simulate --score-model SPEC`, issue 32 item 6: do the policies' gains
// survive an error in the model they optimise?).
//
// A ScoreModel is a list of perturbations of the communication model, parsed from a
// comma-separated SPEC:
//   bw:TIER=F   paths joined at fabric tier TIER get F x the bandwidth
//   lat:TIER=F  paths joined at TIER get F x the latency
//   bw:nvlink=F every node's NVLink bandwidth x F (GPU pairs inside a node)
//   hop-us=X    every switch traversal costs X µs more (a hop-count error: a path joined
//               at tier k crosses 2k+1 switches, so it gains (2k+1) X µs)
//   none        no perturbation (the ground truth itself)
// TIER is a tier name of the cluster (`toposched show`) or `all` (every tier; the top tier's
// factor also applies to cross-root paths). F is a factor (0.7) or a signed percentage
// (-30%, +30%); factors on the same target multiply.
//
// perturbed_cluster() turns it into a copy of the cluster with those factors: the same
// nodes, GPUs and switches with the same ids (so GPU ids chosen on the copy mean the same
// GPUs on the original), only bandwidths and latencies changed. The simulator gives that copy
// to the placers and keeps the original for the runtimes (engine.h), so a policy decides on
// the wrong model and is judged on the true one.
//
// Errors are positioned as `--score-model:1:COL:` (COL the term's first character).
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/cluster.h"
#include "topology/error.h"

namespace toposched::sim {

struct ScoreModelTerm {
  enum class Kind { kBandwidth, kLatency, kHopUs };
  Kind kind = Kind::kBandwidth;
  std::string target;  // tier name, "all" or "nvlink"; empty for kHopUs
  double value = 1;    // the factor (> 0), or µs added per hop (>= 0) for kHopUs
  int column = 0;      // 1-based column of the term in the spec
};

struct ScoreModel {
  std::string spec;  // as given
  std::vector<ScoreModelTerm> terms;
  bool identity() const { return terms.empty(); }
};

// Parses SPEC (the grammar above). Tier names are checked by perturbed_cluster, which
// knows the cluster. `source` names the spec in errors ("--score-model").
Result<ScoreModel> parse_score_model(std::string_view spec, std::string_view source = "--score-model");

// The cluster as the perturbed model sees it (see above). Fails, positioned at the term,
// for a tier the cluster does not have or a factor that leaves a path without bandwidth.
Result<Cluster> perturbed_cluster(const Cluster& cluster, const ScoreModel& model,
                                  std::string_view source = "--score-model");

}  // namespace toposched::sim
