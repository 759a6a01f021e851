// ARC-Top-K (specs/arc-top-k.md): every rank sketches its gradient matrix with the same Philox
// projection, the sketches are summed by one All-Reduce, every rank picks the same top-k rows
// from the summed sketch, and only those rows are summed by a second All-Reduce. Per bucket:
// exactly one sketch All-Reduce (which also carries dense-fallback and exact-path tensors) and
// one values All-Reduce.
#pragma once

#include "compressors/compressor.h"

namespace arcreduce {

class ArcTopK : public Compressor {
 public:
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;
};

}  // namespace arcreduce
