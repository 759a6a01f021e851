#include "runtime/step_batcher.h"

#include <algorithm>

namespace arcreduce {

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

std::vector<Request> StepBatcher::admit(std::vector<Request> incoming, Clock::time_point now) {
  // Off (the default): no per-tensor bookkeeping on the coordinator's path.
  if (!enabled_) return incoming;
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
      step_first_ = now;
    }
    if (step_names_.empty()) step_first_ = now;
    step_names_.insert(r.name);
    const bool eligible = holds(r.signature);
    if (eligible) {
      step_eligible_.insert(r.name);
      step_last_ = now;
    }
    if (!eligible || expected_.empty()) {
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
