// StepNames: learns a rank's training step from its submissions, for the coordinator's holding
// rules (StepBatcher for compressed tensors, DenseGrouper for small dense ones).
//
// A name submitted again marks the start of a new step. Each rule counts some submissions as
// its own ("eligible"); the eligible names of the step before are the ones the current step is
// expected to submit, and twice that step's span (its first submission to its last eligible
// one) plus `slack` bounds how long a held tensor waits for them, so a tensor some step skips
// costs that much, never a hang.
#pragma once

#include <chrono>
#include <string>
#include <unordered_set>

#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class StepNames {
 public:
  explicit StepNames(std::chrono::microseconds slack) : slack_(slack) {}

  // Records a submission at `now`; returns true when it begins a step (the first submission,
  // or a name already submitted in the current step, which ends that step).
  bool add(const std::string& name, bool eligible, Clock::time_point now);
  // The previous step's eligible names; empty before the second step.
  const std::unordered_set<std::string>& expected() const { return expected_; }
  // Whether the current step has submitted every expected name (true while none is expected).
  bool complete() const;
  // Twice the previous step's span plus the slack.
  std::chrono::microseconds hold_limit() const { return hold_limit_; }

 private:
  std::chrono::microseconds slack_;
  std::chrono::microseconds hold_limit_{0};
  std::unordered_set<std::string> names_, eligible_, expected_;
  Clock::time_point first_{}, last_{};
};

}  // namespace arcreduce
