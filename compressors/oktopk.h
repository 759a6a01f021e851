// Ok-Topk (specs/ok-topk.md; docs/compressors.md, "Ok-Topk"): a sparse allreduce with its own
// error feedback, per tensor of a bucket:
//   1. acc = g + residual;
//   2. local selection L = {|acc| > lthr}, lthr exact (k-th largest |acc|) every tau' calls and
//      adjusted in between;
//   3. every tau calls the ranks agree on new region boundaries from their selections;
//   4. split and reduce: each rank sends its picks in region d to rank d (rotated non-blocking
//      messages, at most 4 steps in flight) and sums the picks of its own region;
//   5. each rank keeps the sums of its region above the global threshold gthr (exact every tau'
//      calls), one All-Gather(v) hands every rank all survivors;
//   6. output = survivors / P everywhere; residual = acc without the picks that survived.
// All collectives of one call are shared by the tensors of the bucket (one counts exchange, one
// message per peer, one All-Gather of counts, one All-Gather(v) of survivors, one All-Reduce for
// the tensors that repartition). State per tensor name in the StateStore (CompressContext::state):
// residual, thresholds, boundaries and call counter, so save_state/load_state resume exactly.
// Too small tensors (k < P, fewer than the minimum compressed size) and P = 1 are reduced
// exactly, their residual included.
#pragma once

#include "compressors/compressor.h"

namespace arcreduce {

class OkTopK : public Compressor {
 public:
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;
};

}  // namespace arcreduce
