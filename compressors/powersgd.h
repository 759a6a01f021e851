// PowerSGD (specs/baselines.md; docs/compressors.md, "PowerSGD"), with the semantics of
// PyTorch's DDP powerSGD_hook. Per tensor with an n x m matrix view, rank q = min(
// ARCREDUCE_POWERSGD_RANK, n, m):
//   1. M = g + error (built-in error feedback, fp32, per rank);
//   2. Q: kept from the previous step (warm start; drawn from the shared Philox stream of
//      (seed, name, step) on the first step, and for any column that has become zero),
//      orthogonalised;
//   3. P = M Q; one sum All-Reduce for the P of every compressed tensor of the bucket;
//   4. P orthogonalised (modified Gram-Schmidt; the factor 1/ranks of the mean is irrelevant);
//   5. Q = M^T P; one All-Reduce (mean) for the Q of every compressed tensor;
//   6. output = P Q^T on every rank; error = M - P Q_i^T with Q_i = M^T P this rank's own Q
//      before the All-Reduce (its own approximation, whose mean over ranks is the output);
//      Q kept for the next step.
// Tensors without a matrix view (0-D, 1-D, empty), below ARCREDUCE_MIN_COMPRESS_ELEMENTS, or
// where (n + m) q * min_compression_rate >= n m get the exact mean, fused into the P All-Reduce.
// State per tensor name in the StateStore (CompressContext::state): "powersgd.error" and
// "powersgd.q", so save_state/load_state resume exactly. The reported contribution is
// P Q_i^T = M - error: error feedback is built in, no decorator wraps PowerSGD.
#pragma once

#include "compressors/compressor.h"
#include "compressors/dense_mean.h"

namespace arcreduce {

class PowerSgd : public Compressor {
 public:
  // PyTorch's default min_compression_rate. Tests lower it to run the low-rank path on
  // matrices that the rule would reduce densely (e.g. q = min(n, m)).
  static constexpr double kMinCompressionRate = 2.0;

  explicit PowerSgd(double min_compression_rate = kMinCompressionRate)
      : min_compression_rate_(min_compression_rate) {}
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;

 private:
  double min_compression_rate_;
  // Per-call buffers, kept so that no call allocates or faults in fresh pages.
  PackedBuffer first_;        // P of every low-rank tensor and the dense tensors whole: summed
  PackedBuffer second_;       // Q of every low-rank tensor: averaged
  std::vector<float> own_q_;  // this rank's Q_i, before the average
};

}  // namespace arcreduce
