#include "problem.h"

#include <cmath>

namespace rso {

LocalObjective local_objective(int rank, int size) {
  const bool first_half = rank < size / 2;
  return LocalObjective{first_half ? 100.0 : -100.0, first_half ? 5.0 : -5.0};
}

// With r_bj = w_bj - xi - gamma w_sj:  df/dw_bj = r_bj / 150 for b < 150,
// df/dw_sj = (w_sj - S) - (gamma / 150) sum_b r_bj, and 0 on the unused rows.
void local_gradient(const LocalObjective& f, const std::vector<double>& w,
                    std::vector<double>& grad) {
  grad.assign(kElements, 0.0);
  const double* signal = &w[kSignalRow * kCols];
  double residual_sum[kCols] = {};
  for (int64_t b = 0; b < kNoiseRows; ++b) {
    for (int64_t j = 0; j < kCols; ++j) {
      const double r = w[b * kCols + j] - f.xi - f.gamma * signal[j];
      grad[b * kCols + j] = r / kNoiseRows;
      residual_sum[j] += r;
    }
  }
  for (int64_t j = 0; j < kCols; ++j) {
    grad[kSignalRow * kCols + j] =
        (signal[j] - kSignalTarget) - f.gamma / kNoiseRows * residual_sum[j];
  }
}

double distance_to_optimum(const std::vector<double>& w) {
  double sum = 0;
  for (int64_t i = 0; i < kElements; ++i) {
    const double optimum = i / kCols == kSignalRow ? kOptimalSignal : 0.0;
    sum += (w[i] - optimum) * (w[i] - optimum);
  }
  return std::sqrt(sum);
}

}  // namespace rso
