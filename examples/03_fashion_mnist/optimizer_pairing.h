// Pairs the runtime's error feedback with the example's SGD so that momentum is applied once
// (docs/training-example.md, "Error feedback and momentum"). The user's --lr and --momentum
// describe the heavy-ball SGD they want; this decides who applies the momentum.
#pragma once

#include <string>

#include <arcreduce/config.h>

#include "trainer.h"

namespace fmnist {

struct OptimizerPairing {
  double lr = 0;               // the example's SGD learning rate
  double momentum = 0;         // the example's SGD momentum
  std::string error_feedback;  // what the gradients are submitted with
  double ef_momentum = 0;      // ARCREDUCE_EF_ETA for the runtime
  std::string ef_init;         // ARCREDUCE_EF_INIT for the runtime
  std::string note;            // one line for the log; empty when nothing was moved
};

// - efm: the runtime keeps the momentum (it sees the whole gradient before compression: Deep
//   Gradient Compression's momentum correction): eta = 1 - momentum, SGD runs with momentum 0.
//   With --momentum 0 there is no momentum to carry, and ef14 takes its place.
// - ef21m: its normalised moving average replaces the momentum: eta = 1 - momentum, SGD momentum
//   0 and lr / eta, cold start (the pairing that reproduces dense training at ratio 1).
// - anything else, or a compressor that takes no error feedback: unchanged.
OptimizerPairing pair_optimizer(const TrainOptions& train, const arcreduce::Config& config);

}  // namespace fmnist
