// Links against arcreduce_cuda_kernels and, where a GPU exists, runs two kernels on it. On a
// machine without a GPU (CI) it only proves the library loads and exits 0.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "compressors/kernels/kernels_cuda.h"

namespace {

int run_on_gpu() {
  constexpr int64_t kN = 1000, kK = 10;
  void* x_memory = nullptr;
  void* indices_memory = nullptr;
  if (cudaMalloc(&x_memory, kN * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&indices_memory, kK * sizeof(int64_t)) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  auto* x = static_cast<float*>(x_memory);
  auto* indices = static_cast<int64_t*>(indices_memory);
  arcreduce::kernels::cuda::fill_gaussian(42, x, kN, nullptr);
  arcreduce::kernels::cuda::top_k_abs(x, kN, kK, indices, nullptr);
  std::vector<int64_t> host(kK);
  cudaMemcpy(host.data(), indices, kK * sizeof(int64_t), cudaMemcpyDeviceToHost);
  cudaFree(x);
  cudaFree(indices);
  for (int64_t i = 1; i < kK; ++i) {
    if (host[i - 1] >= host[i]) {
      std::printf("top_k_abs output not sorted\n");
      return 1;
    }
  }
  std::printf("ran fill_gaussian and top_k_abs on the GPU\n");
  return 0;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: arcreduce_cuda_kernels linked, nothing run\n");
    return 0;
  }
  return run_on_gpu();
}
