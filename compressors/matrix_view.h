// How a tensor is seen as a matrix by row-based compressors (ARC-Top-K; Top-K and Rand-K at row
// granularity), and how many rows a ratio keeps. docs/compressors.md states the rules.
#pragma once

#include <cstdint>
#include <string>
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

// ARC-Top-K's view: matrix_view(), with rows longer than `max_row_length` (> 0) split into equal
// pieces, of the largest divisor of the row length in [max_row_length / 2, max_row_length]
// (none: the rows stay whole). Splitting a row-major
// row into consecutive pieces keeps the memory layout: row j of the split view is elements
// [j L, (j + 1) L). 0 keeps the natural view.
MatrixView arc_matrix_view(const std::vector<int64_t>& shape, int64_t max_row_length);

// ARCREDUCE_RANDOM_ROWS: how many of a tensor's k selected rows are drawn uniformly at random
// instead of by score (floor(fraction * k)), and which: the `count` largest of n standard normal
// values from a Philox stream keyed by random_rows_key() (apart from the projection's), a
// uniformly random subset that every rank draws the same and that the device plan draws with
// the same kernels. ARC-Top-K marks them with an infinite score before it takes the top k.
int64_t random_row_count(double fraction, int64_t k);
uint64_t random_rows_key(uint64_t seed, const std::string& name, uint64_t step);
void draw_random_rows(uint64_t seed, const std::string& name, uint64_t step, int64_t n,
                      int64_t count, int64_t* rows);

// max(1, floor(ratio * n)), capped at n (0 when n == 0).
int64_t kept(double ratio, int64_t n);

}  // namespace arcreduce
