#include "compressors/matrix_view.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "compressors/kernels/kernels.h"

namespace arcreduce {

MatrixView matrix_view(const std::vector<int64_t>& shape) {
  MatrixView v;
  if (shape.size() < 2) return v;
  int64_t d = 1;
  for (int64_t s : shape) d *= s;
  if (d == 0) return v;
  if (shape.size() == 2) {
    v.rows = shape[0];
    v.cols = shape[1];
  } else {
    const int64_t t = shape.back();
    const int64_t m = 2 * t * t;
    if (m > 0 && d % m == 0) {
      v.rows = d / m;
      v.cols = m;
    } else {
      v.rows = shape[0];
      v.cols = d / shape[0];
    }
  }
  v.usable = true;
  return v;
}

MatrixView arc_matrix_view(const std::vector<int64_t>& shape, int64_t max_row_length) {
  MatrixView v = matrix_view(shape);
  if (!v.usable || max_row_length <= 0 || v.cols <= max_row_length) return v;
  // Pieces between half the limit and the limit; a row length without such a divisor (a large
  // prime) keeps its rows whole rather than falling to rows too short to sketch.
  int64_t length = 0;
  for (int64_t l = max_row_length; l > 0 && 2 * l >= max_row_length; --l) {
    if (v.cols % l == 0) {
      length = l;
      break;
    }
  }
  if (length == 0) return v;
  v.rows *= v.cols / length;
  v.cols = length;
  return v;
}

int64_t random_row_count(double fraction, int64_t k) {
  if (k <= 0 || fraction <= 0) return 0;
  return std::min(k, static_cast<int64_t>(std::floor(fraction * static_cast<double>(k))));
}

uint64_t random_rows_key(uint64_t seed, const std::string& name, uint64_t step) {
  return kernels::philox_key(seed, name + "\x1frandom rows", step);
}

void draw_random_rows(uint64_t seed, const std::string& name, uint64_t step, int64_t n,
                      int64_t count, int64_t* rows) {
  std::vector<float> z(static_cast<size_t>(n));
  kernels::fill_gaussian(random_rows_key(seed, name, step), z.data(), z.size());
  kernels::top_k_rows(z.data(), n, count, rows);
}

int64_t kept(double ratio, int64_t n) {
  if (n <= 0) return 0;
  auto k = static_cast<int64_t>(std::floor(ratio * static_cast<double>(n)));
  return std::min(n, std::max<int64_t>(1, k));
}

}  // namespace arcreduce
