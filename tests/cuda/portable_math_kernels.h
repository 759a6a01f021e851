// portable_math.h evaluated on the device, for the GPU test that compares it with the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace arcreduce_test {

// For j in [0, count): log_out[j] = portable_log((j + 1) * 2^-24) and
// (sin_out[j], cos_out[j]) = portable_sincos_2pi(j * 2^-24), the inputs Box-Muller receives
// when count = 2^24. Device pointers; enqueued on `stream`.
void portable_math_on_device(float* log_out, float* sin_out, float* cos_out, uint32_t count,
                             cudaStream_t stream);

}  // namespace arcreduce_test
