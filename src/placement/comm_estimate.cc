// predict_comm: the bridge from a placement to the cost model (src/cost). Until the cost
// layer's job model is built in, there is no prediction: callers show none rather than a
// made-up number.
#include "placement/placement.h"

namespace toposched {

std::optional<CommPrediction> predict_comm(const Cluster&, std::span<const GpuId>, const JobRequest&) {
  return std::nullopt;
}

}  // namespace toposched
