// The "robust shifted objective" of the ARC-Top-K reference code: an adversarial synthetic
// problem where every rank's gradient is large, opposite-signed and moving, but the ranks'
// gradients cancel in the mean except on one row that carries the global signal.
//
// Parameters: d = 2000 coordinates viewed as a row-major [200, 10] tensor. Rows 0..149 are
// noise rows, row 150 is the signal row w_s, rows 151..199 are unused. Rank i of N (N even):
// xi_i = +100, gamma_i = +5 in the first half of the ranks, -100 and -5 in the second half.
//   f_i(w) = 1/2 ||w_s - S||^2 + (1/150) 1/2 sum_{b<150} ||w_b - xi_i - gamma_i w_s||^2, S = 1,
// coupled per position j within a row. The mean over ranks has its optimum at w_s = -499/26 in
// all ten positions, every other coordinate 0 (whatever the even N).
#pragma once

#include <cstdint>
#include <vector>

namespace rso {

constexpr int64_t kRows = 200;
constexpr int64_t kCols = 10;
constexpr int64_t kElements = kRows * kCols;
constexpr int64_t kNoiseRows = 150;
constexpr int64_t kSignalRow = 150;
constexpr double kSignalTarget = 1.0;             // S
constexpr double kOptimalSignal = -499.0 / 26.0;  // w_s* = -19.192307692307693

// The rank-dependent constants of f_i.
struct LocalObjective {
  double xi = 0;
  double gamma = 0;
};

// f_i of rank `rank` in a job of `size` ranks; `size` must be even (the halves cancel).
LocalObjective local_objective(int rank, int size);

// Writes grad f_i(w) (noise-free) into `grad`; both hold kElements values, row-major [200, 10].
void local_gradient(const LocalObjective& f, const std::vector<double>& w,
                    std::vector<double>& grad);

// ||w - w*||.
double distance_to_optimum(const std::vector<double>& w);

}  // namespace rso
