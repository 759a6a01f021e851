// The example's use of arcreduce: gradients handed over during backward, and small exact
// reductions (metrics, barriers) that never go through a compressor.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <arcreduce/arcreduce.h>

#include "mlp.h"

namespace fmnist {

// The runtime reported the requested compressor as not built ("not available in this build").
// Every rank sees it at the same submission, so every rank can skip the run consistently.
class CompressorUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Submits gradients with one compression setting and waits for all of them.
class GradientExchange {
 public:
  // `compressor`, `ratio` and `error_feedback` are set on every tensor's AllreduceOptions (error
  // feedback only for topk, randk and arctopk: oktopk and powersgd keep their own residual);
  // the other knobs come from the runtime's Config. Tensors under
  // ARCREDUCE_MIN_COMPRESS_ELEMENTS (biases, the last layer) are reduced densely by the runtime.
  GradientExchange(const std::string& compressor, double ratio, const std::string& error_feedback);

  // allreduce_async(p.name, p.grad, average): p.grad must stay untouched until wait() returns.
  void submit(Parameter& p);
  // Synchronizes every submitted op; afterwards each grad holds the average over ranks.
  // Throws CompressorUnavailable, or std::runtime_error with the first failure's message.
  void wait();

 private:
  arcreduce::AllreduceOptions options_;
  std::vector<arcreduce::Handle> handles_;
};

// Sums `values` over ranks in place (fp64, dense, exact for counts). Collective: every rank
// calls it with the same name and size.
void sum_over_ranks(const std::string& name, std::vector<double>& values);
// Returns once every rank has called it (a one-element reduction).
void barrier();

}  // namespace fmnist
