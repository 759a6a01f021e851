// TensorQueue: the thread-safe table between the submitting threads and the coordinator.
// Submitting threads add entries; the coordinator takes new requests each cycle, later removes
// the entries it executes and completes them. Every entry completes exactly once: callback first
// (on the completing thread, with no lock held), then the handle becomes ready for synchronize().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "arcreduce/types.h"
#include "common/clock.h"
#include "tensor_queue/message.h"

namespace arcreduce {

using Handle = uint64_t;

// Whether the calling thread is inside a completion callback that a TensorQueue runs. Most run on
// a coordinator thread, but a rejected submission (a queue already closed, a duplicate name)
// runs its callback at once on the submitting thread, inside allreduce_async(): the API's
// lifecycle calls treat both alike (docs/cpp-api.md, "Threads and callbacks").
bool in_completion_callback();

struct TensorEntry {
  std::string name;
  Tensor tensor;
  TensorSignature signature;
  std::function<void(const Status&)> callback;
  Handle handle = 0;
  Clock::time_point submitted;
  // CUDA tensors without a ready_event: the runtime's event on the default stream, recorded at
  // submission (a cudaEvent_t; type-erased so this header needs no CUDA).
  std::shared_ptr<void> device_ready;
  // allgather, alltoall, reducescatter: where the output goes (CollectiveOptions::allocate).
  OutputAllocator allocate;
  // Set by the executor when this rank's part failed while the collective itself went through
  // (an output allocator that failed): the op completes with it instead of OK.
  std::shared_ptr<Status> failed;
};

class TensorQueue {
 public:
  TensorQueue() = default;
  TensorQueue(const TensorQueue&) = delete;
  TensorQueue& operator=(const TensorQueue&) = delete;

  // Registers a handle; returns it. Fails the handle at once (callback included) if `name` is in
  // flight or the queue is closed, with `closed_status`'s code and message.
  Handle submit(TensorEntry entry);
  // Completes a fresh handle with `status` without queueing anything (rejected submissions).
  Handle reject(std::function<void(const Status&)> callback, const Status& status);
  // Like reject(), and also queues a refusal of `name` for the coordinator to negotiate, so that
  // the other ranks' op of that name fails with `status`'s message instead of waiting for this
  // rank. Sends nothing when `name` is in flight here (that op still stands) or is empty.
  Handle refuse(const std::string& name, const TensorSignature& signature,
                std::function<void(const Status&)> callback, const Status& status);

  // Coordinator side. Waits until new entries arrive, close() or wake() is called, or `timeout`.
  void wait_for_work(std::chrono::microseconds timeout);
  // After wait_for_work: while new entries keep arriving less than `gap` apart, waits for more,
  // for at most `limit` in all; returns at once when nothing new is queued, on close() or wake().
  // Lets a producer that submits several tensors back to back hand them to one cycle.
  void wait_for_quiet(std::chrono::microseconds gap, std::chrono::microseconds limit);
  // Whether synchronize() blocked on an unfinished op since the last call (which also wakes
  // wait_for_work and ends wait_for_quiet): nothing may be held back for a later batch then.
  bool take_waited();
  // Requests submitted since the last call, in submission order.
  std::vector<Request> take_new_requests();
  // Names of the ops submitted and not yet taken for execution (take_entry), sorted: with those
  // being executed, every op in flight (for error messages).
  std::vector<std::string> in_flight_names() const;
  bool has_in_flight(const std::string& name) const;
  // Moves the in-flight entry `name` into `out` and forgets it; false if it is not in flight.
  bool take_entry(const std::string& name, TensorEntry* out);
  // Completes an entry taken with take_entry. Returns when its callback had returned: before the
  // handle became ready, so before the caller could have submitted again (the timeline's mark).
  Clock::time_point complete(TensorEntry& entry, const Status& status);
  // Refuses further submissions with `status` and completes everything in flight with it.
  void close(const Status& status);
  bool closed() const;
  void wake();
  // Names whose submission should not wake the coordinator (replacing the previous set): the
  // tensors a held step still expects (StepBatcher). Each wake takes a core from backward
  // (several per submission: the wake, the batch gap's timer), and a held tensor is not acted on
  // before the step's last one anyway. A submission of one of them is queued without a wake
  // unless it is the last name of the set; any other submission, synchronize(), close() and
  // wake() wake the coordinator as always, and its own timers (the hold deadline) bound the
  // wait, so nothing waits longer than the holding rules allow. When the last of them arrives,
  // wait_for_quiet() returns at once: the held step is complete.
  void set_silent(std::unordered_set<std::string> names);
  // Submissions that woke the coordinator (those not silent), for tests.
  uint64_t submission_wakeups() const;

  // Ops completed with an OK / an error status so far (rejected submissions included). Counted
  // before the handle becomes ready, so a synchronize() that returned is always counted.
  uint64_t completed_ok() const;
  uint64_t completed_failed() const;

  // Caller side.
  bool poll(Handle handle) const;
  Status synchronize(Handle handle);

 private:
  struct HandleState {
    bool done = false;
    Status status;
  };
  // Runs the callback, then makes the handle ready; returns when the callback had returned.
  Clock::time_point finish(Handle handle, std::function<void(const Status&)>& callback,
                           const Status& status);

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::unordered_map<std::string, TensorEntry> in_flight_;
  std::vector<Request> new_requests_;
  std::unordered_set<std::string> silent_;  // see set_silent()
  bool awaited_arrived_ = false;            // the last silent name arrived: no quiet wait
  uint64_t submission_wakeups_ = 0;
  std::unordered_map<Handle, HandleState> handles_;
  std::deque<Handle> unsynchronized_done_;  // bounds memory of handles nobody synchronizes
  uint64_t completed_ok_ = 0;
  uint64_t completed_failed_ = 0;
  bool closed_ = false;
  bool woken_ = false;
  bool waited_ = false;  // see take_waited()
  Status closed_status_;
};

}  // namespace arcreduce
