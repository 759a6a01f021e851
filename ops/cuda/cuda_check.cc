#include "ops/cuda/cuda_check.h"

#include <cstdio>

#include "arcreduce/status.h"

namespace arcreduce {
namespace cuda {

std::string cuda_error_string(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
}

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  // Clears the error if it is not sticky, so one failed call does not fail the next one.
  (void)cudaGetLastError();
  std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                        ": " + cuda_error_string(code);
  if (code == cudaErrorMemoryAllocation) {
    size_t free_bytes = 0, total_bytes = 0;
    int device = -1;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      char sizes[160];
      std::snprintf(sizes, sizeof(sizes), " (device %d has %.2f GiB free of %.2f GiB)", device,
                    free_bytes / 1073741824.0, total_bytes / 1073741824.0);
      message += sizes;
    }
    message += "; a smaller ARCREDUCE_FUSION_THRESHOLD lowers arcreduce's device memory";
  }
  throw Error(message, StatusCode::kInternal);
}

}  // namespace cuda
}  // namespace arcreduce
