// ARC_CUDA_CHECK(call): runs a CUDA runtime call and throws arcreduce::Error when it does not
// return cudaSuccess, e.g.
//   "cudaMalloc(&p, bytes) failed at ops/cuda/cuda_memory.cc:21: cudaErrorMemoryAllocation:
//    out of memory (device 0 has 1.2 GiB free of 79.1 GiB)".
// Code kInternal; out-of-memory messages add the device's free memory and what to lower.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace arcreduce {
namespace cuda {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
// "cudaErrorNoDevice: no CUDA-capable device is detected".
std::string cuda_error_string(cudaError_t code);

}  // namespace cuda
}  // namespace arcreduce

#define ARC_CUDA_CHECK(call)                                                        \
  do {                                                                              \
    const cudaError_t arc_cuda_rc_ = (call);                                        \
    if (arc_cuda_rc_ != cudaSuccess) {                                              \
      ::arcreduce::cuda::throw_cuda_error(arc_cuda_rc_, #call, __FILE__, __LINE__); \
    }                                                                               \
  } while (0)
