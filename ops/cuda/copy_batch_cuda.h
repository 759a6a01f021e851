// The CUDA launch of a CopyBatch (ops/copy_batch.h): one kernel for all of the batch's segments,
// enqueued on `stream` (borrowed), asynchronous. Pointers must be device-accessible.
#pragma once

#include <cuda_runtime_api.h>

#include "ops/copy_batch.h"

namespace arcreduce {
namespace cuda {

// Values per thread block; a block covers one piece of one segment.
constexpr int64_t kCopyBlockElements = 4096;

void launch_copy_batch(const CopyBatch& batch, ScalarType type, bool scaled, double factor,
                       cudaStream_t stream);

}  // namespace cuda
}  // namespace arcreduce
