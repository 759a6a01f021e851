#include "runtime/step_names.h"

#include <algorithm>

namespace arcreduce {

bool StepNames::add(const std::string& name, bool eligible, Clock::time_point now) {
  if (names_.count(name)) {
    using std::chrono::microseconds;
    const microseconds span = eligible_.empty()
                                  ? microseconds(0)
                                  : std::chrono::duration_cast<microseconds>(last_ - first_);
    spans_[next_span_] = span;
    next_span_ = (next_span_ + 1) % kSpanWindow;
    hold_limit_ = 2 * *std::max_element(spans_.begin(), spans_.end()) + slack_;
    expected_ = std::move(eligible_);
    eligible_.clear();
    names_.clear();
    matched_ = 0;
  }
  const bool begins = names_.empty();
  if (begins) first_ = now;
  names_.insert(name);
  if (eligible) {
    if (eligible_.insert(name).second && expected_.count(name)) ++matched_;
    last_ = now;
  }
  return begins;
}

std::unordered_set<std::string> StepNames::unsubmitted() const {
  std::unordered_set<std::string> out;
  for (const std::string& name : expected_) {
    if (!eligible_.count(name)) out.insert(name);
  }
  return out;
}

}  // namespace arcreduce
