// Coordinator: the background thread of one runtime. It alone uses the Context's communicator:
// each cycle it waits for work (condition variable, no polling), negotiates with the other
// ranks (Controller), plans buckets (plan_buckets) and reduces them (BucketExecutor), then
// completes the ops. It never throws: failures become Status values of the affected ops, and a
// failure of this rank's own loop ends the job on every rank (abort_job), never only here.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "arcreduce/stats.h"
#include "runtime/admission.h"
#include "runtime/batching_trial.h"
#include "runtime/bucket_executor.h"
#include "runtime/compression_choice.h"
#include "runtime/context.h"
#include "runtime/controller.h"
#include "runtime/timeline.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class Coordinator {
 public:
  Coordinator(Context& ctx, TensorQueue& queue, StateStore& state);
  ~Coordinator();  // requests shutdown and joins

  void start();
  // Asks every rank to shut down (through the next negotiation) and waits for this thread;
  // called on the coordinator thread itself (a callback), only asks. Safe from several threads.
  void shutdown();
  // The request alone: the thread ends after the round that agrees on it (shutdown() joins).
  void request_shutdown();
  Stats stats() const;
  // Safe from any thread, also while shutdown() joins the thread on another.
  bool on_coordinator_thread() const { return std::this_thread::get_id() == thread_id_.load(); }
  // Whether the calling thread is the coordinator thread of any runtime (a callback runs there).
  static bool on_any_coordinator_thread();
  // The rank that joined last in the latest completed join (-1 before any).
  int last_joined() const { return last_joined_.load(); }

 private:
  void loop();
  // One negotiation round over `requests` (admitted at `now`); sets *negotiated to its end.
  CyclePlan negotiate(const std::vector<Request>& requests, Clock::time_point now,
                      Clock::time_point* negotiated);
  // Fails every op of this rank with `code` and `reason` and logs it; with `end_job`, ends the
  // whole job after a grace period in which the other ranks report (every abort's path: a
  // stall, an abort agreed in negotiation, and a failure of this rank's coordinator).
  void abort_job(const std::string& reason, bool end_job, StatusCode code = StatusCode::kStalled);
  void execute(const CyclePlan& plan, Clock::time_point negotiated);
  // ARCREDUCE_AUTO_COMPRESS around a bucket of automatic tensors: before, the executor's mode by
  // the step the bucket's first member is in (and, for the first such bucket after load_state(),
  // the choice's saved state, from whichever tensor holds it); after, the step's clock, the
  // batcher's policy and the choice's state in its clock tensor's state.
  void before_automatic(const std::vector<TensorEntry*>& members);
  void after_automatic(const std::vector<TensorEntry*>& members, Clock::time_point end);
  // A joined rank's part in an allreduce it did not submit: zeros of the response's signature.
  TensorEntry zeros_for(const Response& resp);
  void publish();
  // Timeline records of one executed bucket (rank 0 with ARCREDUCE_TIMELINE only).
  void record_bucket(size_t position, const std::vector<TensorEntry*>& members,
                     const TensorSignature& signature, Clock::time_point negotiated,
                     Clock::time_point begin, Clock::time_point end);
  void record_waiting(const TensorEntry& entry, Clock::time_point negotiated);
  // Completes the ops of CUDA buckets whose device work has finished, in bucket order; with
  // `wait`, all of them (shutdown). A device failure fails that bucket's ops.
  void complete_device_buckets(bool wait);
  // After a CommunicationTimeout: asks the communicator which ranks are silent and returns the
  // stall message naming them, what this rank waited in and its tensors in flight. Computed once
  // (the liveness check pairs with the other ranks' own), then returned again.
  std::string describe_timeout(const std::exception& timeout);

  Context& ctx_;
  TensorQueue& queue_;
  StateStore& state_;  // the compressors' (BucketExecutor's) and the choice's saved state
  Controller controller_;
  BucketExecutor executor_;
  Stats stats_;  // coordinator thread only; copied into published_ after each cycle
  mutable std::mutex stats_mutex_;
  Stats published_;
  std::atomic<bool> shutdown_requested_{false};
  std::thread thread_;     // written by start() and shutdown() only
  std::mutex join_mutex_;  // shutdown()'s join: std::thread::join is not safe from two threads
  // The coordinator thread's id while it runs, else the id of no thread. Set by the thread itself,
  // so that on_coordinator_thread() never reads thread_, which shutdown() may be joining.
  std::atomic<std::thread::id> thread_id_{};
  std::unique_ptr<Timeline> timeline_;                            // null: off
  std::unordered_map<std::string, Clock::time_point> requested_;  // timeline: request sent
  // CUDA buckets whose collectives are done but whose unpacking may still be on the device.
  struct DeviceBucket {
    std::vector<TensorEntry> entries;
    std::unique_ptr<DeviceCompletion> done;
  };
  std::deque<DeviceBucket> device_buckets_;
  Admission admission_;
  BatchingTrial trial_;       // decides for admission_'s batcher
  CompressionChoice choice_;  // ARCREDUCE_AUTO_COMPRESS
  // What the coordinator is waiting in ("negotiation", or the bucket being reduced) and the names
  // of the cycle's tensors not yet completed: for the message of a communication timeout.
  std::string activity_;
  std::vector<std::string> executing_;
  std::deque<std::vector<char>> joined_zeros_;  // zeros_for()'s buffers, for one execute()
  std::atomic<int> last_joined_{-1};
  std::string timeout_message_;
};

}  // namespace arcreduce
