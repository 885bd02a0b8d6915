#include "placement/ledger.h"

#include "placement/engine.h"

namespace toposched {

Result<void> AllocationLedger::apply(const Mutation& m) {
  switch (m.kind) {
    case Mutation::Kind::kPlace: return state_.allocate(m.job_id, m.gpus_by_rank, m.order);
    case Mutation::Kind::kRelease: {
      TOPOSCHED_CHECK(state_.release(m.job_id));
      return {};
    }
    case Mutation::Kind::kMarkNode:
    case Mutation::Kind::kUnmarkNode: break;
  }
  return make_error(ErrorCode::kInvalidArgument, "an allocation ledger keeps no node availability");
}

Result<void> AllocationLedger::hold(std::string_view job_id, std::span<const GpuId> gpus) {
  scratch_.kind = Mutation::Kind::kPlace;
  scratch_.job_id.assign(job_id);
  scratch_.gpus_by_rank.assign(gpus.begin(), gpus.end());
  scratch_.order = 0;
  return apply(scratch_);
}

Result<void> AllocationLedger::release_job(std::string_view job_id) {
  scratch_.kind = Mutation::Kind::kRelease;
  scratch_.job_id.assign(job_id);
  scratch_.gpus_by_rank.clear();
  return apply(scratch_);
}

Result<Placement> AllocationLedger::decide(const PlaceRequest& request, PlaceDetail detail) const {
  // place_job without holding only reads the state (it takes a mutable one for its hold).
  return place_job(const_cast<AllocationState&>(state_), request, false, detail);
}

Result<Placement> AllocationLedger::place(const PlaceRequest& request, PlaceDetail detail) {
  TOPOSCHED_TRY(p, decide(request, detail));
  TOPOSCHED_CHECK(hold(p.job_id, p.gpus_by_rank));
  return p;
}

}  // namespace toposched
