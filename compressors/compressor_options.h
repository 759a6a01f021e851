// What the compressors and the error feedbacks read of the job's settings, typed, one part per
// compressor. The runtime builds it once from its Config (compressor_options(),
// runtime/compressor_config.h): each field names the ARCREDUCE_* variable it holds, whose range
// docs/configuration.md gives and Config::validate() enforces. No defaults of its own, so that
// the runtime's stay in one place: a value-initialised CompressorOptions is all zeros (and the
// warm start), which tests that need the runtime's defaults replace with
// compressor_options(Config{}).
#pragma once

#include <cstdint>

namespace arcreduce {

// ARCREDUCE_EF_INIT: how EF21 and EF21M start a tensor's state.
enum class FeedbackInit {
  kWarm,  // from the first gradient: h = g, hbar = mean g (one dense reduction)
  kZero,  // from zero state (cold start)
};

// ARC-Top-K (arctopk.h, arc_path.h).
struct ArcTopKOptions {
  int sketch_rank = 0;     // ARCREDUCE_SKETCH_RANK: columns of the projection, >= 1
  int64_t row_length = 0;  // ARCREDUCE_ROW_LENGTH: longest row of the matrix view; 0 natural
  double random_rows = 0;  // ARCREDUCE_RANDOM_ROWS: share of the k rows drawn at random
};

// The error feedbacks (error_feedback.h, arctopk_device_feedback.h).
struct FeedbackOptions {
  double eta = 0;        // ARCREDUCE_EF_ETA: EF21M's eta; efm's velocity decays by 1 - eta
  bool masking = false;  // ARCREDUCE_EF_MASKING: efm's momentum masking
  FeedbackInit init = FeedbackInit::kWarm;  // ARCREDUCE_EF_INIT
  // ARCREDUCE_WARMUP_STEPS: the dense steps efm runs itself (FeedbackRow::does_own_warmup); the
  // executor runs those of the other feedbacks.
  int64_t warmup_steps = 0;
  // ARCREDUCE_AUTO_COMPRESS chose a dense step: efm sends every tensor densely, as in its
  // warm-up (the other feedbacks' dense steps are the executor's).
  bool dense = false;
};

// Ok-Topk (oktopk.h).
struct OkTopKOptions {
  int64_t tau = 0;         // ARCREDUCE_OKTOPK_TAU: calls between space repartitions, >= 1
  int64_t tau_prime = 0;   // ARCREDUCE_OKTOPK_TAU_PRIME: calls between exact thresholds, >= 1
  bool rebalance = false;  // ARCREDUCE_OKTOPK_REBALANCE: balance the survivors over the ranks
};

// PowerSGD (powersgd.h).
struct PowerSgdOptions {
  int64_t rank = 0;  // ARCREDUCE_POWERSGD_RANK: rank q of the approximation, >= 1
};

struct CompressorOptions {
  uint64_t seed = 0;  // ARCREDUCE_SEED: keys every shared random draw (projections, rows)
  // ARCREDUCE_MIN_COMPRESS_ELEMENTS: smaller tensors are reduced exactly (densely).
  int64_t min_compress_elements = 0;
  bool check_consistency = false;  // ARCREDUCE_CHECK_CONSISTENCY: compare shared selections
  ArcTopKOptions arctopk;
  FeedbackOptions feedback;
  OkTopKOptions oktopk;
  PowerSgdOptions powersgd;
};

}  // namespace arcreduce
