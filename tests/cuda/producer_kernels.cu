#include "producer_kernels.h"

#include "ops/half.h"

namespace arcreduce_test {
namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void ramp(void* data, size_t n, arcreduce::DType dtype, float base, float step) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = base + step * static_cast<float>(i);
  switch (dtype) {
    case arcreduce::DType::kFloat64:
      static_cast<double*>(data)[i] = v;
      break;
    case arcreduce::DType::kFloat16:
      static_cast<uint16_t*>(data)[i] = arcreduce::float_to_fp16(v);
      break;
    case arcreduce::DType::kBFloat16:
      static_cast<uint16_t*>(data)[i] = arcreduce::float_to_bf16(v);
      break;
    default:
      static_cast<float*>(data)[i] = v;
  }
}

void spin_for(int microseconds, cudaStream_t stream) {
  int device = 0, khz = 1000000;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device);
  if (microseconds > 0)
    spin<<<1, 1, 0, stream>>>(static_cast<long long>(khz) * microseconds / 1000);
}

}  // namespace

void spin_then_copy(void* dst, const void* src, size_t bytes, int microseconds,
                    cudaStream_t stream) {
  spin_for(microseconds, stream);
  if (bytes > 0) cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
}

void delayed_ramp(void* data, size_t n, arcreduce::DType dtype, float base, float step,
                  int microseconds, cudaStream_t stream) {
  spin_for(microseconds, stream);
  if (n > 0)
    ramp<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(data, n, dtype, base, step);
}

}  // namespace arcreduce_test
