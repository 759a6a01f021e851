// Runtime configuration. Config::from_env() reads and validates every ARCREDUCE_* variable;
// a Config passed to init() wins over the environment (docs/configuration.md lists all knobs).
// A field's initializer is its default; its variable, accepted values, arcrun flag and whether the
// ranks must agree on it are declared once, in the settings table (runtime/settings.inc).
#pragma once

#include <cstdint>
#include <string>

namespace arcreduce {

// ARCREDUCE_BATCH_COMPRESSED's values.
enum class CompressedBatching { kOff, kOn, kAuto };

struct Config {
  std::string compressor = "arctopk";  // ARCREDUCE_COMPRESSOR
  double compress_ratio = 0.01;        // ARCREDUCE_COMPRESS_RATIO, in (0, 1]
  // ARCREDUCE_AUTO_COMPRESS: tensors that take the compression above without choosing their own
  // go compressed only while measured steps say it shortens the time to accuracy, else dense
  // (docs/auto-compression.md). Config::from_env() turns it off where ARCREDUCE_COMPRESSOR,
  // ARCREDUCE_COMPRESS_RATIO or ARCREDUCE_PRESET is set and it is not: a choice made is obeyed.
  bool auto_compress = true;
  // ARCREDUCE_SKETCH_RANK, >= 1: columns of ARC-Top-K's projection (not an MPI rank). The
  // default is the smallest that kept the steps to accuracy (docs/time-to-accuracy.md).
  int sketch_rank = 2;
  // ARCREDUCE_ROW_LENGTH: longest row of ARC-Top-K's matrix view; longer rows of the natural view
  // are split into equal pieces (docs/compressors.md, "Matrix view"). 0 keeps the natural view.
  int64_t row_length = 256;
  // ARCREDUCE_RANDOM_ROWS: fraction of ARC-Top-K's k rows drawn uniformly at random (the same
  // on every rank) instead of by score, in [0, 1] (docs/compressors.md, "ARC-Top-K").
  double random_rows = 0.5;
  std::string error_feedback = "efm";        // ARCREDUCE_ERROR_FEEDBACK
  double ef_momentum = 0.1;                  // ARCREDUCE_EF_ETA, in (0, 1]: eta = 1 - momentum
  int64_t warmup_steps = 0;                  // ARCREDUCE_WARMUP_STEPS, >= 0
  int64_t min_compress_elements = 16384;     // ARCREDUCE_MIN_COMPRESS_ELEMENTS, >= 0
  uint64_t seed = 0;                         // ARCREDUCE_SEED
  int64_t fusion_threshold = 64ll << 20;     // ARCREDUCE_FUSION_THRESHOLD bytes, 0 disables fusion
  double cycle_time_ms = 1.0;                // ARCREDUCE_CYCLE_TIME_MS, > 0
  int64_t cache_capacity = 1024;             // ARCREDUCE_CACHE_CAPACITY, 0 disables the fast path
  std::string timeline;                      // ARCREDUCE_TIMELINE, empty = off
  double stall_check_seconds = 60;           // ARCREDUCE_STALL_CHECK_SECONDS, 0 disables warnings
  double stall_shutdown_seconds = 600;       // ARCREDUCE_STALL_SHUTDOWN_SECONDS, 0 disables abort
  std::string log_level = "warning";         // ARCREDUCE_LOG_LEVEL
  std::string allreduce_algorithm = "auto";  // ARCREDUCE_ALLREDUCE_ALGORITHM: see communicators.md
  // ARCREDUCE_HIERARCHICAL, where a host runs several ranks of a job across hosts: "auto" (the
  // All-Reduces the ring carries between hosts sum within each host first), "1" (every
  // All-Reduce) or "0" (none: every rank in the exchange across hosts); docs/configuration.md.
  std::string hierarchical = "auto";
  std::string granularity = "element";  // ARCREDUCE_GRANULARITY: topk/randk unit, element or row
  // ARCREDUCE_EF_INIT: "warm" starts error feedback from the first gradient (EF21: h = g,
  // hbar = mean g), "zero" from zero state (cold start).
  std::string ef_init = "warm";
  // ARCREDUCE_EF_MASKING=1: efm clears the momentum where this rank's contribution was sent
  // (Deep Gradient Compression's momentum-factor masking).
  bool ef_masking = true;
  bool check_consistency = false;  // ARCREDUCE_CHECK_CONSISTENCY=1: verify shared selections
  // Ok-Topk (docs/compressors.md, "Ok-Topk"): calls between space repartitions (tau), calls
  // between exact threshold computations (tau'), and whether phase 2 balances the survivors
  // over the ranks before the All-Gather.
  int64_t oktopk_tau = 64;        // ARCREDUCE_OKTOPK_TAU, >= 1
  int64_t oktopk_tau_prime = 32;  // ARCREDUCE_OKTOPK_TAU_PRIME, >= 1
  bool oktopk_rebalance = false;  // ARCREDUCE_OKTOPK_REBALANCE=1
  // PowerSGD (docs/compressors.md, "PowerSGD"): rank q of the approximation P Q^T (PyTorch's
  // matrix_approximation_rank).
  int64_t powersgd_rank = 1;  // ARCREDUCE_POWERSGD_RANK, >= 1
  // ARCREDUCE_CUDA_TRANSPORT: how dense sums of CUDA tensors travel (docs/cuda.md, "Transport").
  // "auto": NCCL in a build with NCCL, else MPI (CUDA-aware when detected, else staged through
  // pinned memory); "nccl": always NCCL (rejected by a build without it); "mpi": never NCCL.
  std::string cuda_transport = "auto";
  // ARCREDUCE_WAIT_MODE: how the coordinator waits for the network and its peers
  // (docs/design/runtime-waiting.md, "Waiting"). "sleep": polls, then sleeps between polls
  // (backing off to wait_max_sleep_us), leaving the core to the training thread; "yield": polls
  // and yields the core between polls; "busy": polls without pause (MPI's own blocking wait).
  std::string wait_mode = "sleep";
  int64_t wait_max_sleep_us = 2000;  // ARCREDUCE_WAIT_MAX_SLEEP_US, in [1, 100000]
  // ARCREDUCE_WAIT_SPIN_US: how long "sleep" polls (yielding) before its first sleep, in
  // [0, 1000000]: completions that come within it are seen without a sleep's delay.
  int64_t wait_spin_us = 1000;
  // ARCREDUCE_BATCH_GAP_US: when submissions wake the coordinator, it takes more for as long as
  // they keep coming less than this apart (at most the cycle time) before it negotiates, so
  // that tensors produced together (a layer's weight and bias) share one cycle and one bucket;
  // in [0, 1000000], 0 negotiates at once. Local to each rank.
  int64_t batch_gap_us = 100;
  // ARCREDUCE_MIN_BUCKET_BYTES: an uncompressed all-reduce is held until the tensors this rank
  // has submitted since make at least this many bytes, or the step's last of them has come
  // (learnt from the step before), so that small tensors share a bucket with the next large one
  // instead of each costing a round (docs/design/runtime-small-dense-buckets.md); 0 holds
  // nothing. Local to each rank.
  int64_t min_bucket_bytes = 1 << 20;
  // ARCREDUCE_BATCH_COMPRESSED: whether compressed tensors (every compressor but "none" and
  // "fp16") wait until this rank has submitted all of the step's (learnt from the previous step)
  // and then go out in one cycle. Fewer rounds, but no overlap of the compressed exchange with
  // backward: it pays where rounds are costly and the exchange is short (many ranks per core, a
  // fast link), and loses on slow links (docs/design/runtime-cycle.md). kAuto (default,
  // "auto") times steps 4-27 (counted after ARCREDUCE_WARMUP_STEPS) alternately held and not, then
  // every rank holds from then on unless the ranks' averaged medians say not holding is more than
  // 3% faster; kOn ("1") holds from the second step, kOff ("0") never holds.
  CompressedBatching batch_compressed = CompressedBatching::kAuto;

  // Reads every ARCREDUCE_* variable over the defaults, or over the preset ARCREDUCE_PRESET names
  // (each setting of a preset can still be overridden by its own variable); throws Error naming
  // the variable, the value and what is accepted. Unknown ARCREDUCE_* variables are an error too
  // (typos).
  static Config from_env();
  // The defaults with a named set of settings applied: "default" (the defaults above) or "paper"
  // (ARC-Top-K as its paper configures it: ratio 0.2, sketch rank 4, the tensors' natural rows,
  // no random rows, EF21M, 1000 dense warm-up steps; docs/configuration.md, "Presets"). Throws
  // Error naming ARCREDUCE_PRESET and the accepted names for any other name.
  static Config preset(const std::string& name);
  // Throws Error (naming the field's variable) if any field is out of range.
  void validate() const;
};

}  // namespace arcreduce
