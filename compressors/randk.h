// Shared Rand-K (specs/baselines.md): every rank draws the same k indices (or rows) from the
// shared Philox stream of (seed, tensor, step), so the kept values are summed by one All-Reduce
// per bucket, no indices on the wire. Output: the mean at those indices, zeros elsewhere (no d/k
// rescaling). Tensors too small to compress ride in the same All-Reduce whole.
#pragma once

#include "compressors/compressor.h"

namespace arcreduce {

class RandK : public Compressor {
 public:
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;
};

}  // namespace arcreduce
