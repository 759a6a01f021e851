// Fusion planning: which ready tensors share a bucket. A pure function of its input, so every
// rank, given the same ordered responses, builds the same buckets without communicating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor_queue/message.h"

namespace arcreduce {

struct Bucket {
  std::vector<size_t> members;  // indices into the planner's input, in input order
  size_t bytes = 0;
};

// Tensors fuse when dtype, device kind, op, compression, collective and root rank are equal
// (broadcasts share buckets only with broadcasts from the same root). Each tensor goes into the
// earliest open bucket with its key that still has room for it under `threshold_bytes`, else
// starts a new bucket; a tensor larger than the threshold gets its own bucket; threshold 0
// disables fusion. Buckets come back in the order they were opened (the execution order).
std::vector<Bucket> plan_buckets(const std::vector<TensorSignature>& tensors,
                                 int64_t threshold_bytes);

bool fusable(const TensorSignature& a, const TensorSignature& b);

}  // namespace arcreduce
