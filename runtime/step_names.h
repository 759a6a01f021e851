// StepNames: learns a rank's training step from its submissions, for the coordinator's holding
// rules (StepBatcher for compressed tensors, DenseGrouper for small dense ones).
//
// A name submitted again marks the start of a new step. Each rule counts some submissions as
// its own ("eligible"); the eligible names of the step before are the ones the current step is
// expected to submit, and twice the longest span of the last kSpanWindow steps (a step's first
// submission to its last eligible one) plus `slack` bounds how long a held tensor waits for
// them, so a tensor some step skips costs that much, never a hang. The longest of several steps,
// not the last one's: a program that alternates steps of different shapes (gradients submitted
// all at once after an evaluation or a gradient-accumulation pass, then as backward produces
// them) would otherwise release a layer-by-layer step's tensors after the short span of the
// all-at-once step before it, one round per layer
// (docs/design/runtime-small-dense-buckets.md, "Steps of different shapes").
#pragma once

#include <array>
#include <chrono>
#include <string>
#include <unordered_set>

#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class StepNames {
 public:
  static constexpr size_t kSpanWindow = 8;

  explicit StepNames(std::chrono::microseconds slack) : slack_(slack) {}

  // Records a submission at `now`; returns true when it begins a step (the first submission,
  // or a name already submitted in the current step, which ends that step).
  bool add(const std::string& name, bool eligible, Clock::time_point now);
  // The previous step's eligible names; empty before the second step.
  const std::unordered_set<std::string>& expected() const { return expected_; }
  // Whether the current step has submitted every expected name (true while none is expected).
  bool complete() const { return matched_ == expected_.size(); }
  // The expected names the current step has not submitted yet.
  std::unordered_set<std::string> unsubmitted() const;
  // Twice the longest span of the last kSpanWindow steps, plus the slack.
  std::chrono::microseconds hold_limit() const { return hold_limit_; }

 private:
  std::chrono::microseconds slack_;
  std::chrono::microseconds hold_limit_{0};
  std::unordered_set<std::string> names_, eligible_, expected_;
  Clock::time_point first_{}, last_{};
  size_t matched_ = 0;  // expected names among this step's eligible ones (complete() in O(1))
  // Spans of the last steps (a step without eligible submissions spans 0), oldest overwritten.
  std::array<std::chrono::microseconds, kSpanWindow> spans_{};
  size_t next_span_ = 0;
};

}  // namespace arcreduce
