// All-Gather Top-K ("TopkA", specs/baselines.md): each rank keeps its own k largest-magnitude
// entries (or k rows of largest norm at row granularity); one All-Gather of a packed
// [values | int32 indices] block per bucket; every rank adds all P contributions and divides by
// P. Received bytes grow linearly with P. Tensors too small to compress go through one dense
// All-Reduce.
#pragma once

#include "compressors/compressor.h"

namespace arcreduce {

class TopK : public Compressor {
 public:
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;
};

}  // namespace arcreduce
