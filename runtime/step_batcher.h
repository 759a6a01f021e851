// StepBatcher: holds this rank's compressed tensors back until backward has produced all of the
// step's, so that they go out in one cycle (one negotiation, one sketch and one values
// All-Reduce for ARC-Top-K) instead of one cycle per layer.
//
// A compressed exchange is small (ARC-Top-K at 0.01 moves a few hundred KB per step), so
// starting it early hides little, while every extra cycle is a synchronous round in which all
// ranks must meet: with ranks that finish their layers a few ms apart, each round waits for the
// last one again. Dense tensors ("none", "fp16") and broadcasts are never held: their transfers
// are what overlap with backward is for.
//
// The step is learnt per rank: submitting a name that was already submitted since the last step
// boundary starts a new step, and the names of held-eligible tensors of the step before are the
// ones expected. Held tensors are released when every expected name has been submitted in this
// step, when the oldest has waited twice the previous step's submission span plus kSlack (a
// tensor that is skipped in some step costs that much, never a hang), or at shutdown. The first
// step holds nothing. Purely local: ranks that release at different times still meet, as the
// negotiation waits for every rank's ready bit.
#pragma once

#include <chrono>
#include <string>
#include <unordered_set>
#include <vector>

#include "tensor_queue/message.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class StepBatcher {
 public:
  static constexpr std::chrono::milliseconds kSlack{5};

  explicit StepBatcher(bool enabled) : enabled_(enabled) {}

  // Takes this cycle's new requests (submission order) at `now`; returns those to negotiate now,
  // held ones that became due first.
  std::vector<Request> admit(std::vector<Request> incoming, Clock::time_point now);
  // Releases everything held (shutdown).
  std::vector<Request> release_all();
  bool holding() const { return !held_.empty(); }
  // When the oldest held request must be released; only meaningful while holding().
  Clock::time_point deadline() const { return held_since_ + hold_limit_; }
  // Whether the tensor of `signature` may be held: a compressed all-reduce.
  static bool holds(const TensorSignature& signature);

 private:
  bool step_complete() const;

  bool enabled_;
  std::vector<Request> held_;
  Clock::time_point held_since_{};
  std::chrono::microseconds hold_limit_{0};
  // Names submitted since the step began, and the held-eligible ones among them.
  std::unordered_set<std::string> step_names_;
  std::unordered_set<std::string> step_eligible_;
  Clock::time_point step_first_{}, step_last_{};
  // The previous step's held-eligible names; empty before the second step.
  std::unordered_set<std::string> expected_;
};

}  // namespace arcreduce
