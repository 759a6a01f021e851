// The CUDA build of the kernels of kernels.h (library arcreduce_cuda_kernels, built by nvcc when
// ARCREDUCE_CUDA is on). Same contracts and same code (kernels_impl.h) as the CPU functions,
// except: every pointer is device memory, work is enqueued on `stream` (borrowed, not owned).
// Element-wise kernels return without synchronising; functions that return a value
// (hash_indices) or size their work from the data (top_k_abs, top_k_rows above 2^20 rows)
// synchronise with the stream. Where the CPU layout suits a GPU badly, the CUDA build runs
// another layout of the same arithmetic (the sketch per (row, lane), row copies per element, row
// selection by one sort; kernels.h's detail:: functions run them on the CPU for the tests), and
// Thrust's scratch memory comes from a stream-ordered pool of each device that keeps what it
// allocated (at most the largest call's scratch). Results are bit-identical across runs and ranks
// of the same build. Against the CPU build: the Gaussian projection (fill_gaussian;
// portable_math.h, no libm) and the row scores (sketch_row_scores, row_sq_norms) are bit-identical
// for the same input, as are all integer results (selections given equal scores, indices, hashes,
// casts). The sketch and the other floating-point arithmetic may differ in the last bits: nvcc
// contracts a * b + c into FMA (as the CPU build's AVX2 sketch does), and the kernels are
// deliberately not built with -fmad=false. That changes nothing about agreement across ranks, even
// with CPU and GPU ranks in one job: a rank's sketch only enters the All-Reduce, and every rank
// scores and selects rows from the same summed sketch with bit-identical scores. philox_key and
// sample_indices are host functions: use the ones of kernels.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "arcreduce/types.h"

namespace arcreduce {
namespace kernels {
namespace cuda {

void fill_gaussian(uint64_t key, float* out, size_t n, cudaStream_t stream);

void fill_gaussian_transposed(uint64_t key, int64_t m, int r, float* vt, cudaStream_t stream);
void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p,
                       cudaStream_t stream);
void sketch_row_scores(const float* p, int64_t n, int r, float* scores, cudaStream_t stream);
void row_sq_norms(const float* y, int64_t n, int64_t m, float* scores, cudaStream_t stream);
void top_k_rows(const float* scores, int64_t n, int64_t k, int64_t* rows, cudaStream_t stream);
void gather_rows(const float* y, int64_t m, const int64_t* rows, int64_t k, float* packed,
                 cudaStream_t stream);
void scatter_rows(const float* packed, int64_t m, const int64_t* rows, int64_t k, float* y,
                  cudaStream_t stream);

void top_k_abs(const float* x, int64_t n, int64_t k, int64_t* indices, cudaStream_t stream);
void gather(const float* x, const int64_t* indices, int64_t k, float* out, cudaStream_t stream);
void scatter_add(const float* values, const int64_t* indices, int64_t k, float alpha, float* y,
                 cudaStream_t stream);
void scatter(const float* values, const int64_t* indices, int64_t k, float* y, cudaStream_t stream);

void fill(float* y, size_t n, float value, cudaStream_t stream);
void scale(float* y, size_t n, float alpha, cudaStream_t stream);
void axpby(float a, const float* x, float b, float* y, size_t n, cudaStream_t stream);
void subtract(const float* x, const float* y, float* out, size_t n, cudaStream_t stream);
void clear_where_sent(const float* sent, float* u, size_t n, cudaStream_t stream);
void momentum_diff(const float* g, float* v, const float* h, float eta, float* diff, size_t n,
                   cudaStream_t stream);
void momentum_diff_restart(const float* g, float* v, const float* h, const float* hbar, float eta,
                           float* diff, float* out, size_t n, cudaStream_t stream);

void to_float(const void* src, DType dtype, float* dst, size_t n, cudaStream_t stream);
void from_float(const float* src, DType dtype, void* dst, size_t n, cudaStream_t stream);

uint64_t hash_indices(const int64_t* indices, int64_t k, cudaStream_t stream);

namespace detail {
// top_k_rows with the selection named, for cuda_kernel_bench: one sort (no synchronisation) or
// the CPU build's sampled selection (reads counts back). top_k_rows picks by n.
void top_k_rows_by_sort(const float* scores, int64_t n, int64_t k, int64_t* rows,
                        cudaStream_t stream);
void top_k_rows_sampled(const float* scores, int64_t n, int64_t k, int64_t* rows,
                        cudaStream_t stream);
}  // namespace detail

}  // namespace cuda
}  // namespace kernels
}  // namespace arcreduce
