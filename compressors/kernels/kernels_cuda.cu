// The CUDA build of the kernels: kernels_impl.h instantiated with Thrust's CUDA system on the
// caller's stream (par_nosync: Thrust synchronises only where a result must reach the host).
#include "compressors/kernels/kernels_cuda.h"

#include <thrust/system/cuda/execution_policy.h>

#include "compressors/kernels/kernels_impl.h"

namespace arcreduce {
namespace kernels {
namespace cuda {
namespace {

auto on(cudaStream_t stream) {
  return ::thrust::cuda::par_nosync.on(stream);
}

}  // namespace

void fill_gaussian(uint64_t key, float* out, size_t n, cudaStream_t stream) {
  impl::fill_gaussian(on(stream), key, out, n);
}

void sketch(const float* y, int64_t n, int64_t m, const float* v, int r, float* p,
            cudaStream_t stream) {
  impl::sketch(on(stream), y, n, m, v, r, p);
}
void transpose_projection(const float* v, int64_t m, int r, float* vt, cudaStream_t stream) {
  impl::transpose_projection(on(stream), v, m, r, vt);
}
void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p,
                       cudaStream_t stream) {
  impl::sketch_transposed(on(stream), y, n, m, vt, r, p);
}
void sketch_row_scores(const float* p, int64_t n, int r, float* scores, cudaStream_t stream) {
  impl::sketch_row_scores(on(stream), p, n, r, scores);
}
void row_sq_norms(const float* y, int64_t n, int64_t m, float* scores, cudaStream_t stream) {
  impl::row_sq_norms(on(stream), y, n, m, scores);
}
void top_k_rows(const float* scores, int64_t n, int64_t k, int64_t* rows, cudaStream_t stream) {
  impl::top_k_rows(on(stream), scores, n, k, rows);
}
void gather_rows(const float* y, int64_t m, const int64_t* rows, int64_t k, float* packed,
                 cudaStream_t stream) {
  impl::gather_rows(on(stream), y, m, rows, k, packed);
}
void scatter_rows(const float* packed, int64_t m, const int64_t* rows, int64_t k, float* y,
                  cudaStream_t stream) {
  impl::scatter_rows(on(stream), packed, m, rows, k, y);
}

void top_k_abs(const float* x, int64_t n, int64_t k, int64_t* indices, cudaStream_t stream) {
  impl::top_k_abs(on(stream), x, n, k, indices);
}
void gather(const float* x, const int64_t* indices, int64_t k, float* out, cudaStream_t stream) {
  impl::gather(on(stream), x, indices, k, out);
}
void scatter_add(const float* values, const int64_t* indices, int64_t k, float alpha, float* y,
                 cudaStream_t stream) {
  impl::scatter_add(on(stream), values, indices, k, alpha, y);
}
void scatter(const float* values, const int64_t* indices, int64_t k, float* y,
             cudaStream_t stream) {
  impl::scatter(on(stream), values, indices, k, y);
}

void fill(float* y, size_t n, float value, cudaStream_t stream) {
  impl::fill(on(stream), y, n, value);
}
void scale(float* y, size_t n, float alpha, cudaStream_t stream) {
  impl::scale(on(stream), y, n, alpha);
}
void axpby(float a, const float* x, float b, float* y, size_t n, cudaStream_t stream) {
  impl::axpby(on(stream), a, x, b, y, n);
}
void subtract(const float* x, const float* y, float* out, size_t n, cudaStream_t stream) {
  impl::subtract(on(stream), x, y, out, n);
}
void momentum_diff(const float* g, float* v, const float* h, float eta, float* diff, size_t n,
                   cudaStream_t stream) {
  impl::momentum_diff(on(stream), g, v, h, eta, diff, n);
}
void momentum_diff_restart(const float* g, float* v, const float* h, const float* hbar, float eta,
                           float* diff, float* out, size_t n, cudaStream_t stream) {
  impl::momentum_diff_restart(on(stream), g, v, h, hbar, eta, diff, out, n);
}

void to_float(const void* src, DType dtype, float* dst, size_t n, cudaStream_t stream) {
  impl::to_float(on(stream), src, dtype, dst, n);
}
void from_float(const float* src, DType dtype, void* dst, size_t n, cudaStream_t stream) {
  impl::from_float(on(stream), src, dtype, dst, n);
}

uint64_t hash_indices(const int64_t* indices, int64_t k, cudaStream_t stream) {
  return impl::hash_indices(on(stream), indices, k);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace arcreduce
