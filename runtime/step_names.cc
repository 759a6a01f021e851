#include "runtime/step_names.h"

namespace arcreduce {

bool StepNames::add(const std::string& name, bool eligible, Clock::time_point now) {
  if (names_.count(name)) {
    expected_ = std::move(eligible_);
    eligible_.clear();
    names_.clear();
    hold_limit_ =
        2 * std::chrono::duration_cast<std::chrono::microseconds>(last_ - first_) + slack_;
  }
  const bool begins = names_.empty();
  if (begins) first_ = now;
  names_.insert(name);
  if (eligible) {
    eligible_.insert(name);
    last_ = now;
  }
  return begins;
}

bool StepNames::complete() const {
  for (const std::string& name : expected_) {
    if (!eligible_.count(name)) return false;
  }
  return true;
}

}  // namespace arcreduce
