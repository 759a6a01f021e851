// Device-side producers for the GPU tests: they write a tensor the way a framework's backward
// would, optionally after spinning for a while, so a runtime that does not wait for the
// producer's stream reads stale memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "arcreduce/types.h"

namespace arcreduce_test {

// Spins on the device for about `microseconds` (clock-rate based), then sets
// data[i] = base + step * i in `dtype`, all on `stream`.
void delayed_ramp(void* data, size_t n, arcreduce::DType dtype, float base, float step,
                  int microseconds, cudaStream_t stream);
// Spins as delayed_ramp, then copies `bytes` from host memory `src` (kept alive by the caller
// until the stream has run) to `dst`, on `stream`.
void spin_then_copy(void* dst, const void* src, size_t bytes, int microseconds,
                    cudaStream_t stream);

}  // namespace arcreduce_test
