// Dense fp32 matrix kernels of the example's MLP, in plain C++ (no BLAS). Single-threaded on
// purpose: the example runs one rank per core, or more ranks than cores.
#pragma once

#include <cstdint>

namespace fmnist {

// C[m x n] = A[m x k] * B[k x n] (or C += A * B when `accumulate`), B and C row-major with
// leading dimensions ldb and ldc. Element (i, p) of A is a[i * a_row_stride + p * a_col_stride],
// so a transposed row-major matrix is passed by swapping the strides. C must not alias A or B.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row_stride,
          int64_t a_col_stride, const float* b, int64_t ldb, float* c, int64_t ldc,
          bool accumulate);

// out[cols x rows] = in[rows x cols] transposed (both row-major, packed).
void transpose(const float* in, int64_t rows, int64_t cols, float* out);

}  // namespace fmnist
