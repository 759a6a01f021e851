// Compression kernels, written once (kernels_impl.h: Thrust algorithms and ARC_HOST_DEVICE
// functors) and compiled twice: by g++ with Thrust's CPP host system for CPU tensors
// (namespace arcreduce::kernels, this header) and by nvcc for CUDA streams (kernels_cuda.h).
//
// Contract shared by every function: buffers are dense fp32 (the compressors' working precision)
// unless a dtype says otherwise, indices are int64, counts are element counts, output buffers are
// written completely and never alias inputs unless stated. Results are deterministic: identical
// inputs give bit-identical outputs on every rank and every run. Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "arcreduce/types.h"

namespace arcreduce {
namespace kernels {

// --- shared randomness (Philox4x32-10, counter based) --------------------------------------

// The stream key of one tensor at one compressed step: a hash of (seed, name, step). Host only.
uint64_t philox_key(uint64_t seed, std::string_view tensor_name, uint64_t step);
// out[i] ~ N(0, 1), a pure function of (key, i): any slice of a stream can be regenerated.
void fill_gaussian(uint64_t key, float* out, size_t n);
// k distinct indices drawn uniformly from [0, n), sorted ascending, a pure function of
// (key, n, k); O(k log k) work, independent of n. Requires 0 <= k <= n. Host only.
void sample_indices(uint64_t key, int64_t n, int64_t k, int64_t* out);
namespace detail {
// sample_indices with its membership structure chosen: a bitmap of n bits or a hash set (the
// output is the same; tests compare them).
void sample_indices_floyd(uint64_t key, int64_t n, int64_t k, int64_t* out, bool bitmap);
}  // namespace detail

// --- ARC-Top-K -----------------------------------------------------------------------------

// p (n x r, row-major) = y (n x m, row-major) * v (m x r, row-major), fp32 accumulation.
void sketch(const float* y, int64_t n, int64_t m, const float* v, int r, float* p);
// The same with the projection given transposed, vt (r x m, row-major): callers that sketch one
// matrix in several row blocks transpose once (transpose_projection) and reuse it. Each row of p
// depends only on the same row of y, so blocks give bit-identical results to one call.
void transpose_projection(const float* v, int64_t m, int r, float* vt);
void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p);
// vt (r x m) = the transpose of the m x r projection fill_gaussian(key, v, m * r) writes, in one
// pass: bit for bit fill_gaussian followed by transpose_projection.
void fill_gaussian_transposed(uint64_t key, int64_t m, int r, float* vt);
// scores[j] = sum_c p[j * r + c]^2.
void sketch_row_scores(const float* p, int64_t n, int r, float* scores);
// scores[j] = sum_c y[j * m + c]^2 (the exact score).
void row_sq_norms(const float* y, int64_t n, int64_t m, float* scores);
// The k rows of largest score; ties go to the lower index, NaN counts as larger than any
// number (as torch.topk). Output sorted ascending. Requires 0 <= k <= n.
void top_k_rows(const float* scores, int64_t n, int64_t k, int64_t* rows);
// packed (k x m) = rows `rows` of y; and the inverse, assigning (other rows untouched).
void gather_rows(const float* y, int64_t m, const int64_t* rows, int64_t k, float* packed);
void scatter_rows(const float* packed, int64_t m, const int64_t* rows, int64_t k, float* y);
namespace detail {
// What the CUDA build runs, on the CPU: the sketch with one thread per (row, lane) and a second
// pass over the lanes, the row copies with one thread per element, and row selection by a sort.
// Same results as the functions above (bit for bit); tests compare them.
void sketch_transposed_lanes(const float* y, int64_t n, int64_t m, const float* vt, int r,
                             float* p);
void gather_rows_elements(const float* y, int64_t m, const int64_t* rows, int64_t k, float* packed);
void scatter_rows_elements(const float* packed, int64_t m, const int64_t* rows, int64_t k,
                           float* y);
// top_k_rows by one sort of all n scores (the CUDA build's choice up to 2^20 rows): same result.
void top_k_rows_by_sort(const float* scores, int64_t n, int64_t k, int64_t* rows);
}  // namespace detail

// --- element selection (Top-K, Rand-K) -----------------------------------------------------

// The k indices of largest |x|; ties to the lower index, NaN largest; sorted ascending.
void top_k_abs(const float* x, int64_t n, int64_t k, int64_t* indices);
// out[i] = x[indices[i]].
void gather(const float* x, const int64_t* indices, int64_t k, float* out);
// y[indices[i]] += alpha * values[i]. Indices within one call must be distinct.
void scatter_add(const float* values, const int64_t* indices, int64_t k, float alpha, float* y);
// y[indices[i]] = values[i].
void scatter(const float* values, const int64_t* indices, int64_t k, float* y);

// --- element-wise (error feedback) ---------------------------------------------------------

void fill(float* y, size_t n, float value);
void scale(float* y, size_t n, float alpha);  // y *= alpha
// y = a * x + b * y (y may alias nothing else).
void axpby(float a, const float* x, float b, float* y, size_t n);
// out = x - y.
void subtract(const float* x, const float* y, float* out, size_t n);
// Momentum-factor masking: u = 0 where sent != 0 (sent is a rank's compressed contribution, zero
// where nothing was sent); u elsewhere unchanged.
void clear_where_sent(const float* sent, float* u, size_t n);
// Error feedback's accumulation in one pass, host only: with u, u = g + beta * u and then
// e = u + e (efm); with u null, e = g + e (ef14); then x = e where x is not null. The same IEEE
// operations as axpby(1, g, beta, u) followed by axpby(1, u, 1, e), so the results are bit for
// bit those of the two passes. None of g, u, e and x overlap.
void accumulate_feedback(const float* g, float* u, float beta, float* e, float* x, size_t n);
// The EF21M pre-step in one pass: v = (1 - eta) * v + eta * g, then diff = v - h.
void momentum_diff(const float* g, float* v, const float* h, float eta, float* diff, size_t n);
// momentum_diff, and out = hbar in the same pass (EF21M's output restarts from the old global
// estimate). out may alias g, and only g.
void momentum_diff_restart(const float* g, float* v, const float* h, const float* hbar, float eta,
                           float* diff, float* out, size_t n);

// --- casts -------------------------------------------------------------------------------

// Any DType to fp32 and back (round to nearest even; fp64 narrows with rounding).
void to_float(const void* src, DType dtype, float* dst, size_t n);
void from_float(const float* src, DType dtype, void* dst, size_t n);

// --- consistency check ---------------------------------------------------------------------

// An order-sensitive 64-bit hash of k indices (ARCREDUCE_CHECK_CONSISTENCY compares it across
// ranks).
uint64_t hash_indices(const int64_t* indices, int64_t k);

}  // namespace kernels
}  // namespace arcreduce
