// One data-parallel training run of the MLP on Fashion-MNIST through arcreduce, and the
// measurement of how much of the communication backward hides.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dataset.h"

namespace fmnist {

struct TrainOptions {
  std::string compressor = "arctopk";   // runtime name: none, fp16, topk, randk, arctopk, ...
  double ratio = 0.01;                  // fraction of entries kept (compressors that use one)
  std::string error_feedback = "none";  // none, ef14, ef21, ef21m (topk, randk, arctopk)
  int64_t epochs = 3;                   // train until this many epochs are done (resume included)
  int64_t batch_size = 64;              // examples per rank per step
  uint64_t seed = 0;                    // model initialisation and shuffling
  double lr = 0.02;
  double momentum = 0.9;
  std::vector<int64_t> widths = {kImagePixels, 1024, 1024, kClasses};
  std::string checkpoint;               // prefix; written after the last epoch
  bool checkpoint_every_epoch = false;  // ... and after every epoch
  std::string resume;                   // prefix of a checkpoint to continue from
  int overlap_steps = 10;               // steps of the overlap measurement; 0: skip it
};

struct EpochResult {
  int64_t epoch = 0;          // 1-based
  double train_loss = 0;      // mean over all ranks' steps of the epoch
  double test_accuracy = 0;   // fraction of the test examples classified correctly
  double step_seconds = 0;    // training time of the epoch / steps (rank 0)
  double bytes_per_step = 0;  // bytes rank 0 sent per step (runtime stats: data + negotiation)
  double seconds = 0;         // the whole epoch, evaluation included
};

// Each phase's time per step (docs/training-example.md): the mean over ranks of each rank's
// median, and the median over steps of the step's longest rank (the step time of a synchronous
// job, as --step-bench reports it).
struct OverlapResult {
  struct Phases {
    double compute_seconds = 0;        // forward + backward, nothing submitted
    double communication_seconds = 0;  // the same gradients reduced, no compute
    double step_seconds = 0;           // forward + backward submitting each gradient + wait
  };
  int steps = 0;  // 0: not measured
  Phases mean_over_ranks;
  Phases longest_rank;
  // (compute + communication - step) / communication over the ranks' means, clamped to [0, 1].
  double hidden_fraction() const;
};

struct RunResult {
  std::string compressor;
  std::string skipped;  // non-empty: the run did not happen, and why
  int64_t parameters = 0;
  int64_t steps_per_epoch = 0;
  int64_t first_epoch = 1;  // > 1 when resumed
  int64_t global_step = 0;  // optimizer steps taken, resumed ones included
  std::vector<EpochResult> epochs;
  OverlapResult overlap;
  uint64_t weights_hash = 0;  // model_hash() after the last epoch
  bool ranks_agree = true;    // every rank holds bit-identical parameters
};

// The step benchmark (--step-bench, bench/e2e): `warmup` untimed training steps, then timed
// ones. A step is forward, backward (handing each gradient to the runtime unless
// `communicate` is false), the wait for the reductions and the SGD step; gathering the batch is
// not timed. There is no barrier between steps, as in training.
struct StepBenchOptions {
  int warmup = 5;
  int steps = 40;           // timed steps at most
  double budget = 0;        // > 0: fewer timed steps (at least min(steps, 10)) when the warm-up's
                            // mean step time says `steps` would take longer than this (seconds)
  bool communicate = true;  // false: the compute floor, nothing submitted to the runtime
  // Non-empty: rank 0 also counts the bytes its host's network interface of this name received
  // and sent (/sys/class/net/NAME/statistics) over the timed steps: all of the host's ranks'
  // traffic across hosts, as the link sees it.
  std::string link_interface;
};

struct StepBenchResult {
  int warmup = 0;
  std::vector<double> step_seconds;  // per timed step: the longest of the ranks' durations
  // Per timed step: how long that longest rank waited for its gradients after backward
  // (exchange.wait(): the communication and compression that did not overlap); 0 without it.
  std::vector<double> wait_seconds;
  // Rank 0's runtime counters over the timed steps (zero on other ranks): bytes sent,
  // communication calls (negotiation included), negotiation calls, coordinator thread CPU
  // seconds. Rank 0 is the negotiation's root, so its coordinator works the most.
  uint64_t bytes_sent = 0;
  uint64_t collectives = 0;
  uint64_t negotiation_collectives = 0;
  double coordinator_cpu_seconds = 0;
  uint64_t held_steps = 0;  // steps whose compressed tensors rank 0 held to one cycle
  // Rank 0's All-Reduce calls and payload bytes over the timed steps by the algorithm that ran
  // them, its other collectives' by kind (arcreduce::Stats), and the link the runtime measured
  // at init (0 on one host).
  std::map<std::string, uint64_t> allreduce_calls, allreduce_bytes;
  std::map<std::string, uint64_t> collective_calls, collective_bytes;
  double link_latency_us = 0;
  double link_mbit_per_s = 0;
  uint64_t link_bytes = 0;  // with link_interface: rank 0's host interface's bytes, both ways
  int hosts = 1;
  bool hierarchical = false;  // All-Reduces summed within each host first (ARCREDUCE_HIERARCHICAL)
  int64_t parameters = 0;
};

// Runs the step benchmark in the initialised runtime. Collective: every rank calls it with the
// same options. Throws CompressorUnavailable or std::runtime_error.
StepBenchResult benchmark_steps(const Dataset& data, const TrainOptions& options,
                                const StepBenchOptions& bench);

// Time to accuracy (--tta, bench/tta): train from scratch until the test accuracy reaches
// `target` or `max_steps` optimizer steps are done, evaluating every `eval_every` steps.
struct TimeToAccuracyOptions {
  int64_t eval_every = 50;
  double target = 0;      // fraction in (0, 1]; 0: train max_steps
  int64_t max_steps = 0;  // > 0
};

struct AccuracyPoint {
  int64_t step = 0;           // optimizer steps done
  double seconds = 0;         // training wall-clock so far (rank 0), evaluations excluded
  double test_accuracy = 0;   // on the whole test set, over all ranks
  double train_loss = 0;      // mean over all ranks' steps since the previous point
  double bytes_per_step = 0;  // bytes rank 0 sent per step since the previous point
};

struct TimeToAccuracyResult {
  std::vector<AccuracyPoint> points;  // the first one is step 0, before training
  int64_t steps_per_epoch = 0;
  bool reached = false;
  bool ranks_agree = true;
};

// Collective: every rank calls it with the same options; `on_point` runs on every rank after
// each evaluation. Throws as train().
TimeToAccuracyResult train_to_accuracy(const Dataset& data, const TrainOptions& options,
                                       const TimeToAccuracyOptions& tta,
                                       const std::function<void(const AccuracyPoint&)>& on_point);

// Called on every rank after each epoch (metrics are already reduced over ranks).
using EpochCallback = std::function<void(const EpochResult&)>;

// Trains in the initialised runtime: resumes from options.resume if set, runs the remaining
// epochs, writes checkpoints, then measures overlap. Collective: every rank calls it with the
// same options. Throws CompressorUnavailable (first step), CheckpointError, DataError or
// std::runtime_error.
RunResult train(const Dataset& data, const TrainOptions& options, const EpochCallback& on_epoch);

}  // namespace fmnist
