// PowerSGD's small linear algebra (compressors/powersgd.cc; docs/compressors.md, "PowerSGD"):
// the skip rule, modified Gram-Schmidt, and the products with a tensor's n x m matrix view M
// (row-major). P (n x q) is stored row-major, as the sketch kernel writes it; Q is stored as
// "qt", q x m row-major (Q's columns back to back), so that every product reads contiguous rows.
#pragma once

#include <cstdint>

namespace arcreduce {
namespace powersgd {

// A column whose norm after the projections is at most this fraction of its norm before them
// is numerically dependent on the earlier columns (its direction would be rounding noise): it
// becomes zero instead of being normalised.
constexpr double kDependentColumn = 1e-4;

// The rank used for an n x m matrix at ARCREDUCE_POWERSGD_RANK q: min(q, n, m), as PyTorch.
int64_t effective_rank(int64_t q, int64_t n, int64_t m);

// PyTorch's _should_compress: the low-rank form (n + m) q is worth sending when
// (n + m) q * min_compression_rate < n m.
bool worth_compressing(int64_t n, int64_t m, int64_t q, double min_compression_rate);

// Modified Gram-Schmidt (as PyTorch's _orthogonalize_gram_schmidt) on the `count` columns of
// `length` values each of `a`, computed in double and written back in fp32: column i is
// normalised, then its projection is removed from every later column. A column that is zero or
// numerically dependent (kDependentColumn) is set to zero. Deterministic. Layout: column c
// element i at a[c * length + i], or at a[i * count + c] when `row_major`.
void orthogonalize_columns(float* a, int64_t length, int count, bool row_major);

// p (n x q, row-major) = M qt^T, i.e. M Q. fp32 accumulation.
void project(const float* m, int64_t n, int64_t cols, const float* qt, int q, float* p);

// qt (q x m) = (M^T P)^T = P^T M for p (n x q, row-major). fp32 accumulation, row after row of
// M.
void back_project(const float* m, int64_t n, int64_t cols, const float* p, int q, float* qt);

// Row by row, in one pass (q >= 1): out = P Q^T (qt: the averaged Q); own = P Q_i^T (own_qt: this
// rank's Q_i), written to `contribution` when that is not null; error -= own (error holds M on
// entry and M - own on return, bit for bit).
void expand(const float* p, int64_t n, int q, const float* qt, const float* own_qt, int64_t cols,
            float* out, float* contribution, float* error);

}  // namespace powersgd
}  // namespace arcreduce
