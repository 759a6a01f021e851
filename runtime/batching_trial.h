// BatchingTrial: ARCREDUCE_BATCH_COMPRESSED=auto's decision, taken by every rank together.
//
// Each rank's StepBatcher times its own trial steps, held and not. The decision must be the same
// everywhere, so it waits until every rank's trial is over: each cycle's negotiation carries this
// rank's vote (ready(): its trial is done) and ANDs the votes (CyclePlan::every_rank_agrees).
// In the first cycle where all agree, every rank calls decide(): one All-Reduce averages the
// ranks' medians and every rank sets the same decision (StepBatcher::hold_pays) on its batcher.
#pragma once

#include "common/logging.h"
#include "ops/communicator.h"
#include "runtime/step_batcher.h"

namespace arcreduce {

class BatchingTrial {
 public:
  explicit BatchingTrial(StepBatcher& batcher) : batcher_(batcher) {}

  // This rank's vote for the negotiation's agreement bit.
  bool ready() const { return batcher_.trial().done; }
  // Whether the decision is still to be taken (call decide() once every rank agrees).
  bool pending() const { return !decided_; }
  // On every rank in the same cycle, once: averages the trial medians over the `size` ranks of
  // `comm` and sets the batcher's decision; rank 0 logs it (info).
  void decide(Communicator& comm, int rank, int size, const Logger& log);

 private:
  StepBatcher& batcher_;
  bool decided_ = false;
};

}  // namespace arcreduce
