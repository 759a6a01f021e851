// ARC-Top-K (specs/arc-top-k.md): every rank sketches its gradient matrix with the same Philox
// projection, the sketches are summed by one All-Reduce, every rank picks the same top-k rows
// from the summed sketch, and only those rows are summed by a second All-Reduce. Per bucket:
// exactly one sketch All-Reduce (which also carries dense-fallback and exact-path tensors) and
// one values All-Reduce.
#pragma once

#include <vector>

#include "compressors/compressor.h"
#include "compressors/dense_mean.h"

namespace arcreduce {

class ArcTopK : public Compressor {
 public:
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;

 private:
  // Reused across buckets: the two collectives' buffers and per-tensor scratch.
  PackedBuffer first_, second_;
  std::vector<float> projection_, scores_, packed_;
};

}  // namespace arcreduce
