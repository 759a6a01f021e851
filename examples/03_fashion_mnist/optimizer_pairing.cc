#include "optimizer_pairing.h"

#include <cstdio>

namespace fmnist {
namespace {

bool takes_error_feedback(const std::string& compressor) {
  return compressor == "topk" || compressor == "randk" || compressor == "arctopk";
}

std::string format(const char* fmt, double a, double b) {
  char line[200];
  std::snprintf(line, sizeof line, fmt, a, b);
  return line;
}

}  // namespace

OptimizerPairing pair_optimizer(const TrainOptions& train, const arcreduce::Config& config) {
  OptimizerPairing p{train.lr,           train.momentum, train.error_feedback,
                     config.ef_momentum, config.ef_init, ""};
  if (!takes_error_feedback(train.compressor) || train.momentum <= 0) {
    if (p.error_feedback == "efm" && takes_error_feedback(train.compressor)) {
      p.error_feedback = "ef14";
      p.note = "error feedback: efm with SGD momentum 0 is ef14 (no momentum to carry)";
    }
    return p;
  }
  const double eta = 1.0 - train.momentum;
  if (train.error_feedback == "efm") {
    p.ef_momentum = eta;
    p.momentum = 0;
    p.note = format(
        "error feedback: efm carries the SGD momentum %g (ARCREDUCE_EF_ETA=%g); SGD runs "
        "without momentum",
        train.momentum, eta);
  } else if (train.error_feedback == "ef21m") {
    p.ef_momentum = eta;
    p.momentum = 0;
    p.lr = train.lr / eta;
    p.ef_init = "zero";
    p.note = format(
        "error feedback: ef21m replaces the SGD momentum (ARCREDUCE_EF_ETA=%g, "
        "ARCREDUCE_EF_INIT=zero); SGD runs without momentum at lr %g",
        eta, p.lr);
  }
  return p;
}

}  // namespace fmnist
