// Compiled with -mavx2 -mfma (cmake/kernels.cmake) and only reached after avx2::available().
// Everything here is either in namespace avx2 or file-local, so the linker cannot hand AVX2
// code to the portable path.
#include "compressors/kernels/kernels_cpu_avx2.h"

#include <immintrin.h>

#include <cmath>

namespace arcreduce {
namespace kernels {
namespace avx2 {
namespace {

// The sketch p = y v, written out in intrinsics: the compiler's version of the portable kernel
// (32 partial sums per dot product, folded by a scalar tree through the stack) spent more time
// folding than multiplying on rows of a few hundred entries. Here each (row, column) dot product
// keeps one register of 8 partial sums; kRows rows share each load of kCols projection columns,
// so that the loop issues one FMA per load instead of two loads per FMA. A row's result depends
// only on that row (not on the rows it is paired with, nor on kRows), so any split of the rows
// into calls gives bit-identical sketches.

// [sum of a, sum of b, sum of c, sum of d], each summed in the same order.
inline __m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b);
  const __m256 cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// Columns [c0, c0 + kCols) of p for rows [row, row + kRows).
template <int kRows, int kCols>
void sketch_block(const float* y, int64_t m, const float* vt, int r, int c0, float* p,
                  int64_t row) {
  const float* v[4];
  for (int c = 0; c < kCols; ++c) v[c] = vt + (c0 + c) * m;
  __m256 acc[kRows][4];
  for (int k = 0; k < kRows; ++k) {
    for (int c = 0; c < 4; ++c) acc[k][c] = _mm256_setzero_ps();
  }
  const int64_t vector_end = m - m % 8;
  for (int64_t i = 0; i < vector_end; i += 8) {
    __m256 w[4];
    for (int c = 0; c < kCols; ++c) w[c] = _mm256_loadu_ps(v[c] + i);
    for (int k = 0; k < kRows; ++k) {
      const __m256 yk = _mm256_loadu_ps(y + (row + k) * m + i);
      for (int c = 0; c < kCols; ++c) acc[k][c] = _mm256_fmadd_ps(yk, w[c], acc[k][c]);
    }
  }
  for (int k = 0; k < kRows; ++k) {
    alignas(16) float sums[4];
    _mm_store_ps(sums, sum4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]));
    const float* yr = y + (row + k) * m;
    for (int64_t i = vector_end; i < m; ++i) {
      for (int c = 0; c < kCols; ++c) sums[c] = std::fma(yr[i], v[c][i], sums[c]);
    }
    for (int c = 0; c < kCols; ++c) p[(row + k) * r + c0 + c] = sums[c];
  }
}

template <int kCols>
void sketch_columns(const float* y, int64_t n, int64_t m, const float* vt, int r, int c0,
                    float* p) {
  int64_t row = 0;
  for (; row + 2 <= n; row += 2) sketch_block<2, kCols>(y, m, vt, r, c0, p, row);
  if (row < n) sketch_block<1, kCols>(y, m, vt, r, c0, p, row);
}

}  // namespace

void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p) {
  if (n <= 0 || r <= 0) return;
  int c0 = 0;
  for (; c0 + 4 <= r; c0 += 4) sketch_columns<4>(y, n, m, vt, r, c0, p);
  switch (r - c0) {
    case 3:
      sketch_columns<3>(y, n, m, vt, r, c0, p);
      break;
    case 2:
      sketch_columns<2>(y, n, m, vt, r, c0, p);
      break;
    case 1:
      sketch_columns<1>(y, n, m, vt, r, c0, p);
      break;
    default:
      break;
  }
}

}  // namespace avx2
}  // namespace kernels
}  // namespace arcreduce
