#include "matmul.h"

#include <algorithm>
#include <cstring>

// The register-tiled kernel is compiled twice on x86-64 with GCC: for AVX2 + FMA (x86-64-v3)
// and for the baseline ISA; the loader picks the clone the CPU supports, so the binary stays
// portable without -march=native.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FMNIST_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define FMNIST_CLONES
#endif

namespace fmnist {
namespace {

constexpr int64_t kRows = 4;     // rows of C per micro-tile
constexpr int64_t kCols = 16;    // columns of C per micro-tile (two AVX registers)
constexpr int64_t kDepth = 256;  // k-block: the B panel kDepth x kPanel stays in L2
constexpr int64_t kPanel = 256;  // columns of B per panel

// C[4 x 16] += A[4 x kc] * B[kc x 16]: the accumulators live in registers across the k loop.
FMNIST_CLONES void tile_full(int64_t kc, const float* a, int64_t ars, int64_t acs, const float* b,
                             int64_t ldb, float* c, int64_t ldc) {
  float acc[kRows][kCols];
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kCols; ++j) acc[r][j] = c[r * ldc + j];
  for (int64_t p = 0; p < kc; ++p) {
    const float* brow = b + p * ldb;
    const float a0 = a[p * acs], a1 = a[ars + p * acs];
    const float a2 = a[2 * ars + p * acs], a3 = a[3 * ars + p * acs];
    for (int64_t j = 0; j < kCols; ++j) {
      acc[0][j] += a0 * brow[j];
      acc[1][j] += a1 * brow[j];
      acc[2][j] += a2 * brow[j];
      acc[3][j] += a3 * brow[j];
    }
  }
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kCols; ++j) c[r * ldc + j] = acc[r][j];
}

// Edge tiles (fewer than 4 rows or 16 columns): row by row, vectorised over columns.
FMNIST_CLONES void tile_edge(int64_t mr, int64_t nr, int64_t kc, const float* a, int64_t ars,
                             int64_t acs, const float* b, int64_t ldb, float* c, int64_t ldc) {
  for (int64_t r = 0; r < mr; ++r) {
    float* crow = c + r * ldc;
    for (int64_t p = 0; p < kc; ++p) {
      const float av = a[r * ars + p * acs];
      const float* brow = b + p * ldb;
      for (int64_t j = 0; j < nr; ++j) crow[j] += av * brow[j];
    }
  }
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row_stride,
          int64_t a_col_stride, const float* b, int64_t ldb, float* c, int64_t ldc,
          bool accumulate) {
  if (!accumulate) {
    for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, sizeof(float) * n);
  }
  for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
    const int64_t kc = std::min(kDepth, k - p0);
    for (int64_t j0 = 0; j0 < n; j0 += kPanel) {
      const int64_t jend = std::min(n, j0 + kPanel);
      for (int64_t i0 = 0; i0 < m; i0 += kRows) {
        const int64_t mr = std::min(kRows, m - i0);
        const float* ablock = a + i0 * a_row_stride + p0 * a_col_stride;
        for (int64_t j = j0; j < jend; j += kCols) {
          const int64_t nr = std::min(kCols, jend - j);
          const float* bblock = b + p0 * ldb + j;
          float* cblock = c + i0 * ldc + j;
          if (mr == kRows && nr == kCols) {
            tile_full(kc, ablock, a_row_stride, a_col_stride, bblock, ldb, cblock, ldc);
          } else {
            tile_edge(mr, nr, kc, ablock, a_row_stride, a_col_stride, bblock, ldb, cblock, ldc);
          }
        }
      }
    }
  }
}

void transpose(const float* in, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kBlock = 32;  // 32 x 32 tiles: both sides stay in L1
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t rend = std::min(rows, r0 + kBlock), cend = std::min(cols, c0 + kBlock);
      for (int64_t r = r0; r < rend; ++r)
        for (int64_t c = c0; c < cend; ++c) out[c * rows + r] = in[r * cols + c];
    }
  }
}

}  // namespace fmnist
