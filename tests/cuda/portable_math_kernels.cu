#include "portable_math_kernels.h"

#include "compressors/kernels/philox.h"
#include "compressors/kernels/portable_math.h"

namespace arcreduce_test {
namespace {

__global__ void evaluate(float* log_out, float* sin_out, float* cos_out, uint32_t count) {
  const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= count) return;
  // The same conversions as Box-Muller's: uniform_open0/uniform_open1 of the word j << 8.
  log_out[j] = arcreduce::kernels::portable_log(arcreduce::kernels::uniform_open0(j << 8));
  arcreduce::kernels::portable_sincos_2pi(arcreduce::kernels::uniform_open1(j << 8), &sin_out[j],
                                          &cos_out[j]);
}

}  // namespace

void portable_math_on_device(float* log_out, float* sin_out, float* cos_out, uint32_t count,
                             cudaStream_t stream) {
  constexpr uint32_t kThreads = 256;
  if (count == 0) return;
  evaluate<<<(count + kThreads - 1) / kThreads, kThreads, 0, stream>>>(log_out, sin_out, cos_out,
                                                                       count);
}

}  // namespace arcreduce_test
