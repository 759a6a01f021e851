// How ARC-Top-K reduces one tensor of a bucket. ArcTopK (compressors/arctopk.cc) and its device
// plan (compressors/arctopk_device_plan.h) both decide through arc_path(), so that the host and
// the CUDA build always take the same path with the same view and k.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compressors/compressor_options.h"
#include "compressors/matrix_view.h"

namespace arcreduce {

enum class ArcPath {
  kDense,   // no useful matrix view, or under ARCREDUCE_MIN_COMPRESS_ELEMENTS: the exact mean
  kExact,   // the sketch would not be smaller than the tensor: sum it, select by exact row norms
  kSketch,  // the ARC path: sketch, select, send the selected rows
  kRandom,  // every row drawn at random (ARCREDUCE_RANDOM_ROWS=1): no sketch, send the rows
};

// The paths whose selected rows go in the values All-Reduce.
inline bool arc_sends_rows(ArcPath path) {
  return path == ArcPath::kSketch || path == ArcPath::kRandom;
}

struct ArcTensorPath {
  ArcPath path = ArcPath::kDense;
  MatrixView view;  // arc_matrix_view() of the shape (also where the path is kDense)
  int64_t k = 0;    // rows kept; 0 on the dense path
};

// The path of a tensor of `shape` and `elements` at compression ratio `ratio`, under the
// options' row length, minimum compressed size, sketch rank and random-row share.
ArcTensorPath arc_path(const std::vector<int64_t>& shape, size_t elements, double ratio,
                       const CompressorOptions& options);

}  // namespace arcreduce
