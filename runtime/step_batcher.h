// StepBatcher: holds this rank's compressed tensors back until backward has produced all of the
// step's, so that they go out in one cycle (one negotiation, one sketch and one values
// All-Reduce for ARC-Top-K) instead of one cycle per layer.
//
// A compressed exchange is small (ARC-Top-K at 0.01 moves a few hundred KB per step), so
// starting it early can hide little, while every extra cycle is a synchronous round in which all
// ranks must meet: with ranks that finish their layers a few ms apart, each round waits for the
// last one again. On a slow link the exchange is long enough that overlapping it with backward
// wins instead. Dense tensors ("none", "fp16") and broadcasts are never held: their transfers
// are what overlap with backward is for.
//
// The step is learnt per rank: submitting a name that was already submitted since the last step
// boundary starts a new step, and the names of held-eligible tensors of the step before are the
// ones expected. Held tensors are released when every expected name has been submitted in this
// step, when the oldest has waited twice the longest submission span of the last steps plus
// kSlack (StepNames::hold_limit; a tensor that is skipped in some step costs that much, never a
// hang), or at shutdown. The first step holds nothing.
//
// CompressedBatching::kAuto decides by measurement. After ARCREDUCE_WARMUP_STEPS and then
// kUnmeasuredSteps more, steps that have
// compressed tensors alternate between holding and not in blocks of kTrialBlockSteps, the first
// step of each block untimed (a trial of kTrialStepsPerMode timed steps each). A step's time runs
// from the last completion of the step before to its own last completion (the last one before the
// next step begins): it covers the step's forward, backward and exchange, and as collectives
// complete together it is about the same on every rank, where times between first submissions would
// carry one rank's lateness into the next step's. Once every rank's trial is over (a bit of the
// negotiation, ANDed), the coordinators average their medians in one All-Reduce and all take the
// same decision (set_agreed): hold unless steps sent as produced were more than kHoldMargin faster.
// Holding takes fewer rounds and less coordinator CPU; what it gives up, the overlap of the
// compressed exchange with backward, pays only where the exchange is long (slow links), and there
// sending as produced wins by far more than the margin (docs/design/runtime-cycle.md). Until
// then the trial's alternation is the only choice, and ranks count the same steps, so they
// alternate together. Ranks that ever choose differently still meet, as the negotiation waits for
// every rank's ready bit; it costs a round, not a hang.
#pragma once

#include <chrono>
#include <string>
#include <unordered_set>
#include <vector>

#include "arcreduce/config.h"
#include "runtime/step_names.h"
#include "tensor_queue/message.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class StepBatcher {
 public:
  static constexpr std::chrono::milliseconds kSlack{5};
  // kAuto: steps before the trial (the first one learns the step's tensors; the next ones may
  // still be slow with first-time allocations), and trial steps per mode.
  static constexpr int kUnmeasuredSteps = 3;
  static constexpr int kTrialStepsPerMode = 8;
  // The trial runs each mode for kTrialBlockSteps steps in a row, held first, and does not time
  // the first step of a block: a step right after a switch carries the other mode's
  // after-effects (docs/design/runtime-cycle.md). kTrialSteps: the trial's steps when every
  // one of them completes something.
  static constexpr int kTrialBlockSteps = 3;
  static_assert(kTrialStepsPerMode % (kTrialBlockSteps - 1) == 0, "whole blocks per mode");
  static constexpr int kTrialSteps =
      2 * kTrialStepsPerMode / (kTrialBlockSteps - 1) * kTrialBlockSteps;
  // Whether trial step `i` (0-based) holds, when every trial step completes something.
  static constexpr bool trial_step_holds(int i) { return (i / kTrialBlockSteps) % 2 == 0; }
  static constexpr double kHoldMargin = 0.03;

  // The outcome of kAuto's trial: medians of the step time with and without holding.
  struct Trial {
    bool done = false;
    double held_median_ms = 0;
    double sent_median_ms = 0;
  };

  // `warmup_steps` (ARCREDUCE_WARMUP_STEPS): steps in which compressed tensors are still reduced
  // densely; the trial starts kUnmeasuredSteps after them, so that it times the compressed
  // exchange.
  explicit StepBatcher(CompressedBatching mode, int64_t warmup_steps = 0)
      : mode_(mode), unmeasured_steps_(static_cast<uint64_t>(warmup_steps) + kUnmeasuredSteps) {}

  // Takes this cycle's new requests (submission order) at `now`; returns those to negotiate now,
  // held ones that became due first.
  std::vector<Request> admit(std::vector<Request> incoming, Clock::time_point now);
  // The coordinator completed ops at `now` (the end of the current step, unless more follow).
  void completed(Clock::time_point now) { last_completion_ = now; }
  // Releases everything held (shutdown).
  std::vector<Request> release_all();
  bool holding() const { return !held_.empty(); }
  // While holding: the names the held step still waits for (TensorQueue::set_silent).
  std::unordered_set<std::string> awaited() const { return steps_.unsubmitted(); }
  // When the oldest held request must be released; only meaningful while holding().
  Clock::time_point deadline() const { return held_since_ + steps_.hold_limit(); }
  // Whether the tensor of `signature` may be held: an all-reduce whose compressor's row is not
  // dense (CompressorTraits::dense, compressors/registry.h).
  static bool holds(const TensorSignature& signature);

  // ARCREDUCE_AUTO_COMPRESS's say over holding (CompressionChoice::holding): kOwn leaves it to
  // the mode above; kNever (its tensors go dense) and kAlways (its compressed trial) decide
  // every step from the next one on, and kAuto's trial waits meanwhile.
  enum class Policy { kOwn, kNever, kAlways };
  void set_policy(Policy policy) { policy_ = policy; }

  // kAuto: the decision every rank took from the averaged trial (true: hold); takes effect at the
  // next step.
  void set_agreed(bool hold) { agreed_ = hold; }
  const Trial& trial() const { return trial_; }
  // Whether the ranks' averaged medians say hold: unless sending as produced was more than
  // kHoldMargin faster (a tie holds).
  static bool hold_pays(double held_median_ms, double sent_median_ms) {
    return sent_median_ms >= (1.0 - kHoldMargin) * held_median_ms;
  }
  // Steps begun in holding mode with compressed tensors to hold (Stats::held_steps).
  uint64_t held_steps() const { return held_steps_; }

 private:
  // At the first submission of a step: ends the previous step (its time goes to the trial) and
  // chooses whether this one holds.
  void begin_step();

  CompressedBatching mode_;
  uint64_t unmeasured_steps_;
  std::vector<Request> held_;
  Clock::time_point held_since_{};
  StepNames steps_{kSlack};  // held-eligible: compressed all-reduces
  bool hold_step_ = false;   // the current step holds
  uint64_t steps_begun_ = 0;
  uint64_t held_steps_ = 0;
  // kAuto: the current step's role in the trial (-1: none, 0: sent, 1: held), the step times
  // measured so far per mode (ms), the outcome and the decision.
  int trial_role_ = -1;
  bool trial_timed_ = false;  // the current trial step's time counts
  int block_left_ = 0;        // trial steps left in the current block
  int block_mode_ = 0;        // the current block's role
  Clock::time_point last_completion_{};
  Clock::time_point previous_end_{};  // the last completion before the current step began
  std::vector<double> trial_ms_[2];
  Trial trial_;
  bool agreed_ = false;
  Policy policy_ = Policy::kOwn;
};

}  // namespace arcreduce
