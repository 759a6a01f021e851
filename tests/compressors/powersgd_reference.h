// A naive PowerSGD step in double precision (the rules of docs/compressors.md, "PowerSGD") that
// simulates all ranks of one tensor in one thread: M_r = g_r + e_r; Q warm-started (all-zero
// columns drawn from the shared Philox stream), orthogonalised; P = sum_r M_r Q, Gram-Schmidt;
// Q_r = M_r^T P, Q = mean_r Q_r; output P Q^T; e_r = M_r - P Q_r^T. Tensors on the dense path:
// output the mean of M_r, e_r = 0. Matrices are column-major: column c of an a x q factor at
// [c * a].
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "compressors/powersgd_math.h"

namespace arcreduce {
namespace testing {

// Modified Gram-Schmidt on `count` columns of `length` doubles, zeroing zero and dependent
// columns (powersgd::kDependentColumn), as the compressor promises.
inline void reference_gram_schmidt(std::vector<double>& a, int64_t length, int count) {
  const auto len = static_cast<size_t>(length);
  auto norm = [&](size_t c) {
    double s = 0;
    for (size_t i = 0; i < len; ++i) s += a[c * len + i] * a[c * len + i];
    return std::sqrt(s);
  };
  std::vector<double> before;
  for (int c = 0; c < count; ++c) before.push_back(norm(c));
  for (int c = 0; c < count; ++c) {
    const double s = norm(c);
    if (!(s > powersgd::kDependentColumn * before[c])) {
      for (size_t i = 0; i < len; ++i) a[c * len + i] = 0;
      continue;
    }
    for (size_t i = 0; i < len; ++i) a[c * len + i] /= s;
    for (int later = c + 1; later < count; ++later) {
      double d = 0;
      for (size_t i = 0; i < len; ++i) d += a[c * len + i] * a[later * len + i];
      for (size_t i = 0; i < len; ++i) a[later * len + i] -= d * a[c * len + i];
    }
  }
}

struct ReferencePowerSgd {
  int ranks;
  std::string name;
  int64_t n, m;  // matrix view
  int q;         // effective rank
  bool low_rank;
  uint64_t seed = 0;
  std::vector<std::vector<double>> error;  // per rank, n x m row-major
  std::vector<double> qmat;                // m x q, column-major; empty before the first step

  ReferencePowerSgd(int ranks_, std::string name_, int64_t n_, int64_t m_, int q_, bool low_rank_)
      : ranks(ranks_),
        name(std::move(name_)),
        n(n_),
        m(m_),
        q(q_),
        low_rank(low_rank_),
        error(ranks_, std::vector<double>(static_cast<size_t>(n_ * m_), 0.0)) {}

  // One step with every rank's gradient g[r] (n * m values); returns the output.
  std::vector<double> step(const std::vector<std::vector<float>>& g, uint64_t compressed_step) {
    const auto d = static_cast<size_t>(n * m);
    std::vector<std::vector<double>> mats(ranks, std::vector<double>(d));
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < d; ++i) mats[r][i] = g[r][i] + error[r][i];
    }
    std::vector<double> out(d, 0.0);
    if (!low_rank) {
      for (int r = 0; r < ranks; ++r) {
        for (size_t i = 0; i < d; ++i) out[i] += mats[r][i] / ranks;
        error[r].assign(d, 0.0);
      }
      return out;
    }
    if (qmat.empty()) qmat.assign(static_cast<size_t>(m * q), 0.0);
    std::vector<float> drawn(static_cast<size_t>(m * q));
    kernels::fill_gaussian(kernels::philox_key(seed, name, compressed_step), drawn.data(),
                           drawn.size());
    for (int c = 0; c < q; ++c) {
      bool zero = true;
      for (int64_t j = 0; j < m; ++j) zero = zero && qmat[c * m + j] == 0.0;
      if (!zero) continue;
      for (int64_t j = 0; j < m; ++j) qmat[c * m + j] = drawn[c * m + j];
    }
    reference_gram_schmidt(qmat, m, q);
    std::vector<double> p(static_cast<size_t>(n * q), 0.0);
    for (int r = 0; r < ranks; ++r) {
      for (int c = 0; c < q; ++c) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < m; ++j) p[c * n + i] += mats[r][i * m + j] * qmat[c * m + j];
        }
      }
    }
    reference_gram_schmidt(p, n, q);
    std::vector<std::vector<double>> own(ranks, std::vector<double>(static_cast<size_t>(m * q)));
    std::vector<double> mean(static_cast<size_t>(m * q), 0.0);
    for (int r = 0; r < ranks; ++r) {
      for (int c = 0; c < q; ++c) {
        for (int64_t j = 0; j < m; ++j) {
          double s = 0;
          for (int64_t i = 0; i < n; ++i) s += mats[r][i * m + j] * p[c * n + i];
          own[r][c * m + j] = s;
          mean[c * m + j] += s / ranks;
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        for (int c = 0; c < q; ++c) out[i * m + j] += p[c * n + i] * mean[c * m + j];
        for (int r = 0; r < ranks; ++r) {
          double approx = 0;
          for (int c = 0; c < q; ++c) approx += p[c * n + i] * own[r][c * m + j];
          error[r][i * m + j] = mats[r][i * m + j] - approx;
        }
      }
    }
    qmat = mean;
    return out;
  }
};

}  // namespace testing
}  // namespace arcreduce
