#include "runtime/step_batcher.h"

#include <algorithm>

namespace arcreduce {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

bool StepBatcher::holds(const TensorSignature& signature) {
  const std::string& c = signature.compression.compressor;
  return signature.collective == Collective::kAllreduce && c != "none" && c != "fp16";
}

bool StepBatcher::step_complete() const {
  if (expected_.empty()) return true;
  for (const std::string& name : expected_) {
    if (!step_eligible_.count(name)) return false;
  }
  return true;
}

void StepBatcher::begin_step(Clock::time_point now) {
  const Clock::time_point end = last_completion_;  // of the step that ends here
  // A step without completions (nothing waited for) has no time of its own: not counted.
  if (trial_role_ >= 0 && previous_end_ != Clock::time_point{} && end > previous_end_) {
    trial_ms_[trial_role_].push_back(
        std::chrono::duration<double, std::milli>(end - previous_end_).count());
    const size_t need = kTrialStepsPerMode;
    if (trial_ms_[0].size() >= need && trial_ms_[1].size() >= need) {
      trial_.done = true;
      trial_.held_median_ms = median(trial_ms_[1]);
      trial_.sent_median_ms = median(trial_ms_[0]);
    }
  }
  previous_end_ = end;
  step_first_ = now;
  ++steps_begun_;
  trial_role_ = -1;
  switch (mode_) {
    case CompressedBatching::kOff:
      hold_step_ = false;
      break;
    case CompressedBatching::kOn:
      hold_step_ = true;
      break;
    case CompressedBatching::kAuto:
      // Only steps that have compressed tensors to hold tell the two modes apart.
      if (!trial_.done && steps_begun_ > unmeasured_steps_ && !expected_.empty()) {
        trial_role_ = trial_ms_[1].size() <= trial_ms_[0].size() ? 1 : 0;
        hold_step_ = trial_role_ == 1;
      } else {
        hold_step_ = trial_.done && agreed_;
      }
      break;
  }
  if (hold_step_ && !expected_.empty()) ++held_steps_;
}

std::vector<Request> StepBatcher::admit(std::vector<Request> incoming, Clock::time_point now) {
  // Off: no per-tensor bookkeeping on the coordinator's path.
  if (mode_ == CompressedBatching::kOff) return incoming;
  std::vector<Request> out;
  for (Request& r : incoming) {
    if (step_names_.count(r.name)) {
      // A name seen again: the previous step is over, and its compressed tensors are what the
      // next one is expected to hold.
      expected_ = std::move(step_eligible_);
      const auto span =
          std::chrono::duration_cast<std::chrono::microseconds>(step_last_ - step_first_);
      hold_limit_ = 2 * span + std::chrono::microseconds(kSlack);
      step_names_.clear();
      step_eligible_.clear();
    }
    if (step_names_.empty()) begin_step(now);
    step_names_.insert(r.name);
    const bool eligible = holds(r.signature);
    if (eligible) {
      step_eligible_.insert(r.name);
      step_last_ = now;
    }
    if (!eligible || expected_.empty() || !hold_step_) {
      out.push_back(std::move(r));
      continue;
    }
    if (held_.empty()) held_since_ = now;
    held_.push_back(std::move(r));
  }
  if (!held_.empty() && (step_complete() || now >= deadline())) {
    for (Request& r : held_) out.push_back(std::move(r));
    held_.clear();
  }
  return out;
}

std::vector<Request> StepBatcher::release_all() {
  std::vector<Request> out;
  out.swap(held_);
  return out;
}

}  // namespace arcreduce
