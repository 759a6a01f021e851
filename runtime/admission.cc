#include "runtime/admission.h"

#include <algorithm>

namespace arcreduce {

Admission::Admitted Admission::admit(std::vector<Request> taken, Clock::time_point now,
                                     bool release) {
  std::vector<Request> tensors, refusals;
  for (Request& r : taken) (r.refusal.empty() ? tensors : refusals).push_back(std::move(r));

  Admitted out;
  out.requests = grouper_.admit(batcher_.admit(std::move(tensors), now), now);
  for (Request& r : refusals) out.requests.push_back(std::move(r));
  if (release) {
    for (Request& r : batcher_.release_all()) out.requests.push_back(std::move(r));
    for (Request& r : grouper_.release_all()) out.requests.push_back(std::move(r));
  }

  // Every wake during backward takes a core from the training thread; a held step's remaining
  // tensors need not wake the coordinator, only its last one does (docs/design/runtime-cycle.md,
  // "Held steps do not wake the coordinator").
  if (batcher_.holding()) {
    out.silent = batcher_.awaited();
    silent_ = true;
  } else if (silent_) {
    out.silent = std::unordered_set<std::string>();
    silent_ = false;
  }
  return out;
}

std::chrono::microseconds Admission::wait(std::chrono::microseconds wait,
                                          Clock::time_point now) const {
  const auto until = [&](Clock::time_point deadline) {
    const auto due = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    wait = std::max(std::chrono::microseconds(0), std::min(wait, due));
  };
  if (batcher_.holding()) until(batcher_.deadline());
  if (grouper_.holding()) until(grouper_.deadline());
  return wait;
}

bool Admission::round_wanted(const RoundInputs& in) const {
  if (in.requests || in.work_in_flight || in.shutdown) return true;
  return !holding() && in.since_last_round >= kIdleCycle;
}

}  // namespace arcreduce
