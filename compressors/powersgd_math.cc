#include "compressors/powersgd_math.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "compressors/kernels/kernels.h"

namespace arcreduce {
namespace powersgd {

int64_t effective_rank(int64_t q, int64_t n, int64_t m) {
  return std::max<int64_t>(0, std::min({q, n, m}));
}

bool worth_compressing(int64_t n, int64_t m, int64_t q, double min_compression_rate) {
  const double low_rank = static_cast<double>(n + m) * static_cast<double>(q);
  return q > 0 && low_rank * min_compression_rate < static_cast<double>(n) * static_cast<double>(m);
}

void orthogonalize_columns(float* a, int64_t length, int count, bool row_major) {
  const auto len = static_cast<size_t>(length);
  // Reused across calls (a P of a large embedding is a few MB): no allocation per call.
  thread_local std::vector<double> cols;
  cols.resize(len * static_cast<size_t>(count));
  for (int c = 0; c < count; ++c) {
    for (size_t i = 0; i < len; ++i)
      cols[c * len + i] = row_major ? a[i * count + c] : a[c * len + i];
  }
  auto dot = [len](const double* x, const double* y) {
    double s = 0;
    for (size_t i = 0; i < len; ++i) s += x[i] * y[i];
    return s;
  };
  std::vector<double> before(static_cast<size_t>(count));
  for (int c = 0; c < count; ++c) {
    const double* col = cols.data() + c * len;
    before[c] = std::sqrt(dot(col, col));
  }
  for (int c = 0; c < count; ++c) {
    double* col = cols.data() + c * len;
    const double norm = std::sqrt(dot(col, col));
    if (!(norm > kDependentColumn * before[c])) {  // also zero (before = 0) and NaN
      std::fill(col, col + len, 0.0);
      continue;  // nothing to remove from the later columns
    }
    for (size_t i = 0; i < len; ++i) col[i] /= norm;
    for (int later = c + 1; later < count; ++later) {
      double* rest = cols.data() + later * len;
      const double projection = dot(col, rest);
      for (size_t i = 0; i < len; ++i) rest[i] -= projection * col[i];
    }
  }
  for (int c = 0; c < count; ++c) {
    for (size_t i = 0; i < len; ++i) {
      (row_major ? a[i * count + c] : a[c * len + i]) = static_cast<float>(cols[c * len + i]);
    }
  }
}

void project(const float* m, int64_t n, int64_t cols, const float* qt, int q, float* p) {
  if (n > 0 && q > 0) kernels::sketch_transposed(m, n, cols, qt, q, p);
}

void back_project(const float* m, int64_t n, int64_t cols, const float* p, int q, float* qt) {
  std::fill(qt, qt + static_cast<size_t>(cols) * q, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = m + i * cols;
    for (int c = 0; c < q; ++c) {
      const float a = p[i * q + c];
      float* out = qt + c * cols;
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j) out[j] += a * row[j];
    }
  }
}

void expand(const float* p, int64_t n, int q, const float* qt, const float* own_qt, int64_t cols,
            float* out, float* contribution, float* error) {
  std::vector<float> scratch(contribution ? 0 : static_cast<size_t>(cols));
  for (int64_t i = 0; i < n; ++i) {
    float* mean_row = out + i * cols;
    float* own_row = contribution ? contribution + i * cols : scratch.data();
    const float* pi = p + i * q;
#pragma GCC ivdep
    for (int64_t j = 0; j < cols; ++j) {
      mean_row[j] = pi[0] * qt[j];
      own_row[j] = pi[0] * own_qt[j];
    }
    for (int c = 1; c < q; ++c) {
      const float* mean_col = qt + c * cols;
      const float* own_col = own_qt + c * cols;
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j) {
        mean_row[j] += pi[c] * mean_col[j];
        own_row[j] += pi[c] * own_col[j];
      }
    }
    float* e = error + i * cols;
#pragma GCC ivdep
    for (int64_t j = 0; j < cols; ++j) e[j] -= own_row[j];
  }
}

}  // namespace powersgd
}  // namespace arcreduce
