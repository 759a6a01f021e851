#include "ops/cuda/copy_batch_cuda.h"
#include "ops/cuda/cuda_check.h"

#include <string>

#include "arcreduce/status.h"

namespace arcreduce {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void copy_batch_kernel(const CopyBatch batch, ScalarType type, bool scaled,
                                  double factor) {
  copy_batch_block(batch, blockIdx.x, threadIdx.x, blockDim.x, type, scaled, factor);
}

}  // namespace

void launch_copy_batch(const CopyBatch& batch, ScalarType type, bool scaled, double factor,
                       cudaStream_t stream) {
  const int64_t blocks = batch.blocks();
  if (blocks == 0) return;
  if (blocks > 0x7fffffff) {
    throw Error("launch_copy_batch: " + std::to_string(blocks) + " blocks exceed CUDA's grid",
                StatusCode::kInternal);
  }
  copy_batch_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(batch, type, scaled,
                                                                            factor);
  ARC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace arcreduce
