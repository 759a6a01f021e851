// ARC-Top-K (specs/arc-top-k.md): every rank sketches its gradient matrix with the same Philox
// projection, the sketches are summed by one All-Reduce, every rank picks the same top-k rows
// from the summed sketch, and only those rows are summed by a second All-Reduce. Per bucket:
// at most one sketch All-Reduce (which also carries dense-fallback and exact-path tensors) and
// one values All-Reduce. With ARCREDUCE_RANDOM_ROWS=1 every row is drawn from the shared seed,
// so no sketch is computed or sent: the first All-Reduce carries only the dense tensors.
#pragma once

#include <vector>

#include "compressors/compressor.h"
#include "compressors/dense_mean.h"

namespace arcreduce {

class ArcTopK : public Compressor {
 public:
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;
  bool accepts_lazy_input() const override { return true; }
  // Inputs are sketched, copied (dense and exact paths) or gathered (sketch path) before any
  // output is written; only the exact path's contribution reads the input afterwards.
  bool reduces_in_place() const override { return true; }

 private:
  // sketch (n x r) of t's n x m matrix with transposed_ (streaming a lazy input block by block).
  void sketch_tensor(CompressTensor& t, int64_t n, int64_t m, int r, float* sketch);

  // Reused across buckets: the two collectives' buffers and per-tensor scratch.
  PackedBuffer first_, second_, materialized_;
  std::vector<float> transposed_, scores_, packed_, block_;
};

}  // namespace arcreduce
