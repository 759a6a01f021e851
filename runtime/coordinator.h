// Coordinator: the background thread of one runtime. It alone uses the Context's communicator:
// each cycle it waits for work (condition variable, no polling), negotiates with the other
// ranks (Controller), plans buckets (plan_buckets) and reduces them (BucketExecutor), then
// completes the ops. It never throws: failures become Status values of the affected ops.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "arcreduce/stats.h"
#include "runtime/bucket_executor.h"
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
  // Asks every rank to shut down (through the next negotiation) and waits for this thread.
  void shutdown();
  Stats stats() const;
  bool on_coordinator_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop();
  void execute(const CyclePlan& plan, Clock::time_point negotiated);
  void publish();
  // Timeline records of one executed bucket (rank 0 with ARCREDUCE_TIMELINE only).
  void record_bucket(size_t position, const std::vector<TensorEntry*>& members,
                     const TensorSignature& signature, Clock::time_point negotiated,
                     Clock::time_point begin, Clock::time_point end);
  void record_waiting(const TensorEntry& entry, Clock::time_point negotiated);
  // Completes the ops of CUDA buckets whose device work has finished, in bucket order; with
  // `wait`, all of them (shutdown). A device failure fails that bucket's ops.
  void complete_device_buckets(bool wait);

  Context& ctx_;
  TensorQueue& queue_;
  Controller controller_;
  BucketExecutor executor_;
  Stats stats_;  // coordinator thread only; copied into published_ after each cycle
  mutable std::mutex stats_mutex_;
  Stats published_;
  std::atomic<bool> shutdown_requested_{false};
  std::thread thread_;
  std::unique_ptr<Timeline> timeline_;                            // null: off
  std::unordered_map<std::string, Clock::time_point> requested_;  // timeline: request sent
  // CUDA buckets whose collectives are done but whose unpacking may still be on the device.
  struct DeviceBucket {
    std::vector<TensorEntry> entries;
    std::unique_ptr<DeviceCompletion> done;
  };
  std::deque<DeviceBucket> device_buckets_;
};

}  // namespace arcreduce
