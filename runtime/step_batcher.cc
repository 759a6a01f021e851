#include "runtime/step_batcher.h"

#include <algorithm>

#include "compressors/registry.h"

namespace arcreduce {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

bool StepBatcher::holds(const TensorSignature& signature) {
  const CompressorTraits* traits = find_compressor(signature.compression.compressor);
  return signature.collective == Collective::kAllreduce && !(traits && traits->dense);
}

void StepBatcher::begin_step() {
  const Clock::time_point end = last_completion_;  // of the step that ends here
  // A step without completions (nothing waited for) has no time of its own: not counted.
  if (trial_role_ >= 0 && trial_timed_ && previous_end_ != Clock::time_point{} &&
      end > previous_end_) {
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
  ++steps_begun_;
  trial_role_ = -1;
  if (policy_ != Policy::kOwn) {
    hold_step_ = policy_ == Policy::kAlways;
    if (hold_step_ && !steps_.expected().empty()) ++held_steps_;
    return;
  }
  switch (mode_) {
    case CompressedBatching::kOff:
      hold_step_ = false;
      break;
    case CompressedBatching::kOn:
      hold_step_ = true;
      break;
    case CompressedBatching::kAuto:
      // Only steps that have compressed tensors to hold tell the two modes apart.
      if (!trial_.done && steps_begun_ > unmeasured_steps_ && !steps_.expected().empty()) {
        if (block_left_ == 0) {
          block_mode_ = trial_ms_[1].size() <= trial_ms_[0].size() ? 1 : 0;
          block_left_ = kTrialBlockSteps;
        }
        trial_role_ = block_mode_;
        trial_timed_ = block_left_ < kTrialBlockSteps;
        --block_left_;
        hold_step_ = trial_role_ == 1;
      } else {
        hold_step_ = trial_.done && agreed_;
      }
      break;
  }
  if (hold_step_ && !steps_.expected().empty()) ++held_steps_;
}

std::vector<Request> StepBatcher::admit(std::vector<Request> incoming, Clock::time_point now) {
  // Off: no per-tensor bookkeeping on the coordinator's path.
  if (mode_ == CompressedBatching::kOff) return incoming;
  std::vector<Request> out;
  for (Request& r : incoming) {
    // The previous step's compressed tensors are what a step is expected to hold.
    const bool eligible = holds(r.signature);
    if (steps_.add(r.name, eligible, now)) begin_step();
    if (!eligible || steps_.expected().empty() || !hold_step_) {
      out.push_back(std::move(r));
      continue;
    }
    if (held_.empty()) held_since_ = now;
    held_.push_back(std::move(r));
  }
  if (!held_.empty() && (steps_.complete() || now >= deadline())) {
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
