// DenseGrouper: holds this rank's small dense all-reduces back until, together with what backward
// produces next, they make a bucket worth a round (ARCREDUCE_MIN_BUCKET_BYTES), as PyTorch DDP
// launches no bucket before it has filled.
//
// Backward hands over its last layers' gradients first, and they are small (a classifier's few
// KB, each layer's bias a little ahead of its weight). Sent as produced, each is a latency-bound
// round of its own while the link is idle, and the first large bucket goes out only after them
// (docs/design/runtime-small-dense-buckets.md, "Small dense buckets", has the measurement).
//
// The step is learnt per rank (StepNames, as StepBatcher learns it): a name submitted again
// starts a new step, and the dense names of the step before are the ones expected. A held tensor
// is released with the others when the held bytes reach the minimum, when every expected dense
// name has been submitted in this step (the last small tensors of a step are not kept waiting for
// a next one), when the oldest has waited twice the longest submission span of the last steps
// plus kSlack (StepNames::hold_limit; a tensor that some step skips costs that much, never a
// hang), or through release_all() (shutdown, or a user blocked on an op). The first step holds
// nothing. Compressed tensors are StepBatcher's; broadcasts are never held.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/step_names.h"
#include "tensor_queue/message.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class DenseGrouper {
 public:
  static constexpr std::chrono::milliseconds kSlack{5};

  // `min_bytes` 0: hold nothing.
  explicit DenseGrouper(size_t min_bytes) : min_bytes_(min_bytes) {}

  // Takes this cycle's requests (submission order) at `now`; returns those to negotiate now,
  // held ones that became due first, in submission order.
  std::vector<Request> admit(std::vector<Request> incoming, Clock::time_point now);
  std::vector<Request> release_all();
  bool holding() const { return !held_.empty(); }
  // When the oldest held request must be released; only meaningful while holding().
  Clock::time_point deadline() const { return held_since_ + steps_.hold_limit(); }
  // Whether the tensor of `signature` may be held: an all-reduce whose compressor's row is dense
  // (CompressorTraits::dense, compressors/registry.h: none, fp16).
  static bool holds(const TensorSignature& signature);

 private:
  size_t min_bytes_;
  std::vector<Request> held_;
  size_t held_bytes_ = 0;
  Clock::time_point held_since_{};
  StepNames steps_{kSlack};  // eligible: uncompressed all-reduces
};

}  // namespace arcreduce
