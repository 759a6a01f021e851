// The CUDA build of the kernels (kernels_cuda.h) as a backend of the ARC-Top-K device plan
// (compressors/arctopk_device_plan.h): every pointer is device memory, every call is enqueued on
// `stream`. top_k_rows above 2^20 rows synchronises with the stream (it sizes its work from the
// data); the rest only enqueue. Link arcreduce_cuda_kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "arcreduce/status.h"
#include "compressors/kernels/kernels_cuda.h"

namespace arcreduce {

struct CudaArcKernels {
  cudaStream_t stream = nullptr;

  void fill_gaussian(uint64_t key, float* out, size_t n) {
    kernels::cuda::fill_gaussian(key, out, n, stream);
  }
  void fill_gaussian_transposed(uint64_t key, int64_t m, int r, float* vt) {
    kernels::cuda::fill_gaussian_transposed(key, m, r, vt, stream);
  }
  void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p) {
    kernels::cuda::sketch_transposed(y, n, m, vt, r, p, stream);
  }
  void sketch_row_scores(const float* p, int64_t n, int r, float* s) {
    kernels::cuda::sketch_row_scores(p, n, r, s, stream);
  }
  void row_sq_norms(const float* y, int64_t n, int64_t m, float* s) {
    kernels::cuda::row_sq_norms(y, n, m, s, stream);
  }
  void top_k_rows(const float* s, int64_t n, int64_t k, int64_t* rows) {
    kernels::cuda::top_k_rows(s, n, k, rows, stream);
  }
  void gather_rows(const float* y, int64_t m, const int64_t* rows, int64_t k, float* packed) {
    kernels::cuda::gather_rows(y, m, rows, k, packed, stream);
  }
  void scatter_rows(const float* packed, int64_t m, const int64_t* rows, int64_t k, float* y) {
    kernels::cuda::scatter_rows(packed, m, rows, k, y, stream);
  }
  void fill(float* y, size_t n, float v) { kernels::cuda::fill(y, n, v, stream); }
  void scale(float* y, size_t n, float a) { kernels::cuda::scale(y, n, a, stream); }
  void axpby(float a, const float* x, float b, float* y, size_t n) {
    kernels::cuda::axpby(a, x, b, y, n, stream);
  }
  void subtract(const float* x, const float* y, float* out, size_t n) {
    kernels::cuda::subtract(x, y, out, n, stream);
  }
  void momentum_diff(const float* g, float* v, const float* h, float eta, float* diff, size_t n) {
    kernels::cuda::momentum_diff(g, v, h, eta, diff, n, stream);
  }
  void clear_where_sent(const float* sent, float* u, size_t n) {
    kernels::cuda::clear_where_sent(sent, u, n, stream);
  }
  void copy(float* dst, const float* src, size_t n) {
    if (n == 0) return;
    const cudaError_t rc =
        cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
    if (rc != cudaSuccess) {
      throw Error(std::string("ARC-Top-K device plan: cudaMemcpyAsync: ") + cudaGetErrorString(rc),
                  StatusCode::kInternal);
    }
  }
};

}  // namespace arcreduce
