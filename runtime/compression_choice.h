// CompressionChoice: ARCREDUCE_AUTO_COMPRESS's decision, taken by every rank together
// (docs/auto-compression.md).
//
// Compression pays only where the step it shortens outweighs the extra steps a compressed
// gradient needs to reach the same accuracy: ARC-Top-K at 1% took 2.4-2.6x dense's steps on the
// MLP it was tuned on and 4.2x on one of another width. The runtime cannot know that factor
// before training, but it can time the step both ways on the job's own hardware and links. So
// the tensors it manages (CompressionSpec::automatic: they took the job's compression without
// choosing their own) go kDenseTrialSteps steps dense and then kCompressedTrialSteps steps
// compressed (the first steps of each untimed, below). Once every rank's trial is over (the
// negotiation's agreement bit), one All-Reduce averages the ranks' medians and every rank takes the
// same decision: compressed where the dense step is at least kStepsFactor times the compressed one,
// else dense. Both modes are real training steps; dense ones carry efm's momentum as its warm-up
// does.
//
// The step's clock is the first automatic tensor ever executed (the first member of the first
// automatic bucket: the same on every rank, as buckets are negotiated): a step is the time from
// one of its executions to the next, and the clock's count of executions says when the trial is
// over. A bucket's mode follows the step its first member is in (its own count of reductions,
// saved with its state), not the clock's count, so that every tensor of a step goes the same way
// whether its bucket ran before or after the clock's: buckets form by timing, and a resumed job's
// first step holds nothing back. Every rank counts the same reductions and takes the decision in
// the same cycle, so every bucket is reduced the same way on every rank: replicas stay
// bit-identical. Until the decision, the trial's schedule alone sets the mode; past the trial's
// last step and before the agreement, tensors go dense.
//
// Coordinator thread only.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "compressors/tensor_state.h"
#include "ops/communicator.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class CompressionChoice {
 public:
  // The trial: kDenseTrialSteps dense steps, the first kUntimedDenseSteps of them untimed
  // (first-time allocations; TCP's flows ramp up), then kCompressedTrialSteps compressed, the
  // first untimed (it carries the dense steps' after-effects). Dense first: at the start of
  // training a dense step is worth most, and a switch from compressed to dense would deliver
  // the compressed steps' residual at once, an outsized step (auto's dense steps drop it).
  static constexpr int kDenseTrialSteps = 5;
  static constexpr int kUntimedDenseSteps = 2;
  static constexpr int kCompressedTrialSteps = 6;
  static constexpr int kTrialSteps = kDenseTrialSteps + kCompressedTrialSteps;
  // The dense step must be this many times the compressed one for compression to win: above the
  // step factor of ARC-Top-K at 1% on the MLP it was tuned on (2.4-2.6x), so that where the
  // step gains are marginal the job stays dense, which never needs extra steps.
  static constexpr double kStepsFactor = 3.0;

  enum class Mode { kCompressed, kDense };
  // What StepBatcher may do with the compressed tensors of the current step.
  enum class Holding { kOwn, kNever, kAlways };

  struct Trial {
    bool done = false;
    double compressed_median_ms = 0;
    double dense_median_ms = 0;
  };

  explicit CompressionChoice(bool enabled) : enabled_(enabled) {}

  bool enabled() const { return enabled_; }
  // The mode of the interval the clock is in now (the trial's schedule by the clock's count).
  Mode mode() const;
  // How a bucket of automatic tensors whose first member was reduced `reductions` times before
  // (TensorState::reductions: the step it is in) is reduced now: the trial's schedule in the
  // trial's steps (also where the decision came in the middle of that step), past them dense
  // while the decision is pending, then as decided. Every tensor of a step gets the same mode,
  // whether its bucket ran before or after the clock's. A tensor first reduced after the others
  // goes through the trial's schedule by its own count.
  Mode mode_at(uint64_t reductions) const;
  // The StepBatcher's holding policy now: always in the compressed trial (one exchange per step,
  // what the compressed default usually runs), never while dense (dense transfers overlap with
  // backward), its own choice once compression was chosen.
  Holding holding() const;
  // A bucket of automatic tensors, `names` in bucket order, was reduced, ending at `now`.
  void executed(const std::vector<const std::string*>& names, Clock::time_point now);

  // This rank's vote: its trial is over and the decision is still to be taken.
  bool ready() const { return enabled_ && trial_.done && !decided_; }
  bool pending() const { return enabled_ && started() && !decided_; }
  // On every rank in the same cycle, once every rank is ready(): averages the medians over the
  // `size` ranks of `comm` (one All-Reduce) and takes the decision; rank 0 logs it (info).
  void decide(Communicator& comm, int rank, int size, const Logger& log);
  // Whether the ranks' averaged medians say compress.
  static bool compression_pays(double compressed_median_ms, double dense_median_ms) {
    return compressed_median_ms > 0 && dense_median_ms >= kStepsFactor * compressed_median_ms;
  }

  // The choice's own state (its clock's count, the timed steps, the decision), kept in its clock
  // tensor's TensorState so that save_state()/load_state() carry it: a job resumed after the
  // decision goes on as decided, one resumed during the trial goes on with it.
  void save_to(TensorState& clock_state) const;
  // After load_state(): takes the record from the first of `states` that holds one, whose name
  // becomes the clock. Returns whether one was found. Only before the clock has started.
  bool restore_from(const std::vector<std::pair<const std::string*, const TensorState*>>& states);

  const Trial& trial() const { return trial_; }
  bool decided() const { return decided_; }
  // Whether an automatic tensor has run: before that nothing is timed, and the agreement bit
  // and StepBatcher belong to ARCREDUCE_BATCH_COMPRESSED's trial alone.
  bool started() const { return !clock_.empty(); }
  const std::string& clock() const { return clock_; }
  // "off", "trial", "dense" or "compressed", for Stats and the log.
  const char* state() const;
  bool compressing() const { return decided_ && compress_; }
  uint64_t steps() const { return steps_; }
  // What the trial averaged over the ranks, once decided (0 before).
  double agreed_compressed_ms() const { return agreed_compressed_ms_; }
  double agreed_dense_ms() const { return agreed_dense_ms_; }

 private:
  // The mode of the interval that follows the clock's execution number `step` (0-based).
  Mode scheduled(uint64_t step) const;
  // Whether that interval is timed, and for which mode.
  bool timed(uint64_t step, Mode* mode) const;

  bool enabled_;
  std::string clock_;   // the first automatic tensor's name; empty until it runs
  uint64_t steps_ = 0;  // executions of clock_
  Clock::time_point last_{};
  std::vector<double> ms_[2];  // timed intervals by Mode
  Trial trial_;
  bool decided_ = false;
  bool compress_ = false;
  double agreed_compressed_ms_ = 0;
  double agreed_dense_ms_ = 0;
};

}  // namespace arcreduce
