#include "compressors/arc_path.h"

namespace arcreduce {

ArcTensorPath arc_path(const std::vector<int64_t>& shape, size_t elements, double ratio,
                       const CompressorOptions& options) {
  const ArcTopKOptions& arc = options.arctopk;
  ArcTensorPath p;
  p.view = arc_matrix_view(shape, arc.row_length);
  if (!p.view.usable || static_cast<int64_t>(elements) < options.min_compress_elements) return p;
  const int64_t n = p.view.rows, m = p.view.cols, r = arc.sketch_rank;
  p.k = kept(ratio, n);
  const bool sketch_smaller = r < m && n * r + p.k * m < n * m;
  p.path = sketch_smaller ? ArcPath::kSketch : ArcPath::kExact;
  if (p.k > 0 && random_row_count(arc.random_rows, p.k) == p.k) p.path = ArcPath::kRandom;
  return p;
}

}  // namespace arcreduce
