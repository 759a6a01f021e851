// How a tensor is seen as a matrix by row-based compressors (ARC-Top-K; Top-K and Rand-K at row
// granularity), and how many rows a ratio keeps. docs/compressors.md states the rules.
#pragma once

#include <cstdint>
#include <vector>

namespace arcreduce {

struct MatrixView {
  int64_t rows = 0;
  int64_t cols = 0;
  bool usable = false;  // false: 0-D/1-D or empty, no useful matrix view
};

// 2-D [a, b] -> a x b. N-D [..., t]: (d / 2t^2) x 2t^2 when 2t^2 divides d (the reference's
// view of conv kernels), else shape[0] x d / shape[0]. 0-D and 1-D: not usable.
MatrixView matrix_view(const std::vector<int64_t>& shape);

// max(1, floor(ratio * n)), capped at n (0 when n == 0).
int64_t kept(double ratio, int64_t n);

}  // namespace arcreduce
