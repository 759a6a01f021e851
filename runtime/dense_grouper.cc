#include "runtime/dense_grouper.h"

namespace arcreduce {

bool DenseGrouper::holds(const TensorSignature& signature) {
  const std::string& c = signature.compression.compressor;
  return signature.collective == Collective::kAllreduce && (c == "none" || c == "fp16");
}

bool DenseGrouper::step_complete() const {
  for (const std::string& name : expected_) {
    if (!step_dense_.count(name)) return false;
  }
  return true;
}

std::vector<Request> DenseGrouper::admit(std::vector<Request> incoming, Clock::time_point now) {
  if (min_bytes_ == 0) return incoming;
  std::vector<Request> out;
  for (Request& r : incoming) {
    if (step_names_.count(r.name)) {
      // A name seen again: the previous step is over (nothing more joins what it still holds);
      // its dense tensors are the ones the next step expects.
      for (Request& h : held_) out.push_back(std::move(h));
      held_.clear();
      held_bytes_ = 0;
      expected_ = std::move(step_dense_);
      const auto span =
          std::chrono::duration_cast<std::chrono::microseconds>(step_last_ - step_first_);
      hold_limit_ = 2 * span + std::chrono::microseconds(kSlack);
      step_names_.clear();
      step_dense_.clear();
    }
    if (step_names_.empty()) step_first_ = now;
    step_names_.insert(r.name);
    if (!holds(r.signature)) {
      out.push_back(std::move(r));
      continue;
    }
    step_dense_.insert(r.name);
    step_last_ = now;
    if (expected_.empty()) {
      out.push_back(std::move(r));
      continue;
    }
    if (held_.empty()) held_since_ = now;
    held_bytes_ += r.signature.bytes();
    held_.push_back(std::move(r));
  }
  if (!held_.empty() && (held_bytes_ >= min_bytes_ || step_complete() || now >= deadline())) {
    for (Request& r : held_) out.push_back(std::move(r));
    held_.clear();
    held_bytes_ = 0;
  }
  return out;
}

std::vector<Request> DenseGrouper::release_all() {
  std::vector<Request> out;
  out.swap(held_);
  held_bytes_ = 0;
  return out;
}

}  // namespace arcreduce
