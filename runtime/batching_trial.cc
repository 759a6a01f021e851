#include "runtime/batching_trial.h"

namespace arcreduce {

void BatchingTrial::decide(Communicator& comm, int rank, int size, const Logger& log) {
  decided_ = true;
  const StepBatcher::Trial& trial = batcher_.trial();
  double medians[2] = {trial.held_median_ms, trial.sent_median_ms};
  comm.allreduce(medians, 2, ScalarType::kFloat64, CollectiveOp::kSum);
  const double held = medians[0] / size, sent = medians[1] / size;
  const bool hold = StepBatcher::hold_pays(held, sent);
  batcher_.set_agreed(hold);
  if (rank != 0) return;
  log->info(
      "ARCREDUCE_BATCH_COMPRESSED=auto: median step {:.2f} ms with compressed tensors held to one "
      "cycle, {:.2f} ms sent as produced ({} steps each, mean over ranks; this rank {:.2f} and "
      "{:.2f} ms): {}",
      held, sent, StepBatcher::kTrialStepsPerMode, trial.held_median_ms, trial.sent_median_ms,
      hold ? "holding them from now on" : "sending them as produced");
}

}  // namespace arcreduce
