#include "compressors/matrix_view.h"

#include <algorithm>
#include <cmath>

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

int64_t kept(double ratio, int64_t n) {
  if (n <= 0) return 0;
  auto k = static_cast<int64_t>(std::floor(ratio * static_cast<double>(n)));
  return std::min(n, std::max<int64_t>(1, k));
}

}  // namespace arcreduce
