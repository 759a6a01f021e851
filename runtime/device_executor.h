// DeviceExecutor: how a bucket of CUDA tensors is reduced (docs/cuda.md). The BucketExecutor
// hands it every bucket whose device kind is kCUDA. Everything here runs on the coordinator
// thread, on one runtime-owned stream per device; framework streams are only waited on.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "arcreduce/stats.h"
#include "compressors/phase_log.h"
#include "compressors/tensor_state.h"
#include "runtime/context.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

// The device work of one bucket that was still queued when run() returned.
class DeviceCompletion {
 public:
  virtual ~DeviceCompletion() = default;
  // True once the bucket's results are in the tensors' memory. Throws Error if the device
  // reports a failure.
  virtual bool ready() = 0;
  virtual void wait() = 0;
};

class DeviceExecutor {
 public:
  // Runs the CPU executor on host copies of a bucket (entries whose data is host memory).
  using HostPath = std::function<void(const std::vector<TensorEntry*>&)>;

  virtual ~DeviceExecutor() = default;
  // Reduces `entries` (one device, one signature) in place. Returns once the collectives are
  // done; what is still queued on the device (unpacking, scaling) is the returned completion,
  // which the caller polls before completing the ops. Phases go to `phases` (the timeline; the
  // device part is timed as the host sees it). Throws Error on failure.
  virtual std::unique_ptr<DeviceCompletion> run(const std::vector<TensorEntry*>& entries,
                                                const TensorSignature& signature, Stats& stats,
                                                CompressorStats& cstats, PhaseLog& phases,
                                                const HostPath& host_path) = 0;
};

// A compressed bucket's tensors still in their ARCREDUCE_WARMUP_STEPS (reduced densely) and the
// others, in bucket order; counts this reduction in each tensor's state. The caller holds the
// store's mutex. Shared by the host and the CUDA executors.
struct WarmupSplit {
  std::vector<TensorEntry*> warmup, compressed;
};
WarmupSplit split_warmup(const std::vector<TensorEntry*>& entries, StateStore& state,
                         int64_t warmup_steps);

// nullptr in a build without CUDA. Creates no CUDA state until the first run(). `state` is the
// runtime's compressor state: counters of CUDA tensors live there, and their error-feedback
// buffers are mirrored in device memory (the executor attaches itself as the store's mirror).
std::unique_ptr<DeviceExecutor> make_device_executor(Context& ctx, StateStore& state);

// For a tensor submitted without a ready_event: a runtime-owned event recorded now on the
// legacy default stream of `device`, which orders after all work queued so far on every
// blocking stream of that device (the per-thread default stream included). Throws Error.
std::shared_ptr<void> record_default_stream(int device);

}  // namespace arcreduce
