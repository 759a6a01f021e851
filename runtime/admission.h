// Admission: what this rank puts into the next negotiation round, and when.
//
// Two holds keep tensors back so that fewer, fuller rounds go out: StepBatcher (compressed
// tensors until the step's last one, ARCREDUCE_BATCH_COMPRESSED) and DenseGrouper (small dense
// tensors until a bucket is worth a round, ARCREDUCE_MIN_BUCKET_BYTES). Admission owns both and
// answers every question the coordinator's loop has about holding, in one place:
//
//   admit()         which of the cycle's new requests go to the negotiation now: refusals always
//                   (they are messages, not tensors), held ones when due, and everything when a
//                   user blocks on an op or at shutdown; and the names whose submission need not
//                   wake the coordinator (a held step's awaited names: only its last one does);
//   wait()          how long the coordinator may sleep before a hold's deadline;
//   round_wanted()  whether the cycle runs a negotiation round at all.
//
// Not thread-safe: the coordinator thread's alone.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "arcreduce/config.h"
#include "runtime/dense_grouper.h"
#include "runtime/step_batcher.h"
#include "tensor_queue/message.h"

namespace arcreduce {

class Admission {
 public:
  // While no rank has anything in flight the coordinator cycles this slowly, so that idle ranks
  // do not spin in MPI; a local submission still wakes it at once.
  static constexpr std::chrono::milliseconds kIdleCycle{50};

  Admission(CompressedBatching batching, int64_t warmup_steps, size_t min_bucket_bytes)
      : batcher_(batching, warmup_steps), grouper_(min_bucket_bytes) {}

  struct Admitted {
    // To negotiate now: the new requests that pass (submission order, held ones that became due
    // first), then the refusals, then what `release` freed.
    std::vector<Request> requests;
    // Set when the names that need not wake the coordinator change (TensorQueue::set_silent).
    std::optional<std::unordered_set<std::string>> silent;
  };
  // `taken`: the cycle's new requests, in submission order, at `now`. `release`: a user blocks
  // on an op (a synchronous allreduce per tensor, say) or the runtime shuts down, so nothing may
  // wait for the rest of a step.
  Admitted admit(std::vector<Request> taken, Clock::time_point now, bool release);

  bool holding() const { return batcher_.holding() || grouper_.holding(); }
  // `wait`, shortened so that it ends no later than the earliest hold's deadline (never below 0):
  // held tensors are released at their deadline even when nothing else wakes the loop.
  std::chrono::microseconds wait(std::chrono::microseconds wait, Clock::time_point now) const;

  // What round_wanted() weighs.
  struct RoundInputs {
    bool requests = false;        // admit() gave something to negotiate
    bool work_in_flight = false;  // negotiation pending on this rank, or device work unfinished
    bool shutdown = false;        // shutdown() was called on this rank
    Clock::duration since_last_round{};
  };
  // A round with nothing in it makes every other rank spend its next round, and its next step's
  // tensors, on this one, so a cycle with nothing to report (woken by held submissions, or by a
  // user who blocked on an op the last round already took) runs none. The idle round is due
  // after kIdleCycle (it keeps the other ranks' negotiations and stall reports going), but not
  // while a hold is on: its deadline bounds the wait as well, and a step longer than kIdleCycle
  // would otherwise meet an empty round in the middle of its backward.
  bool round_wanted(const RoundInputs& in) const;

  // The coordinator completed ops at `now` (the end of the step, unless more follow).
  void completed(Clock::time_point now) { batcher_.completed(now); }
  StepBatcher& batcher() { return batcher_; }
  const StepBatcher& batcher() const { return batcher_; }

 private:
  StepBatcher batcher_;
  DenseGrouper grouper_;
  bool silent_ = false;  // the last silent set given out is non-empty
};

}  // namespace arcreduce
