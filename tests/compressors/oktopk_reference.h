// A naive Ok-Topk (specs/ok-topk.md with the rules of docs/compressors.md, "Ok-Topk") that
// simulates all ranks in one thread: sorts instead of selection kernels, dense vectors instead
// of messages. It adds each region's picks in the order the compressor does (the owner's own
// picks, then ranks owner-1, owner-2, ...), so outputs and residuals must match bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace arcreduce {
namespace testing {

struct ReferenceOkTopK {
  int ranks;
  int64_t n;
  double density;
  int64_t tau = 64, tau_prime = 32, min_elements = 0;

  std::vector<std::vector<float>> residual;  // per rank
  std::vector<double> lthr;
  bool has_lthr = false, has_gthr = false;
  double gthr = 0;
  std::vector<int64_t> off;
  int64_t calls = 0;

  ReferenceOkTopK(int ranks_, int64_t n_, double density_)
      : ranks(ranks_), n(n_), density(density_), residual(ranks_), lthr(ranks_, 0.0) {
    for (auto& r : residual) r.assign(static_cast<size_t>(n), 0.0f);
  }

  static std::vector<int64_t> even(int64_t n, int p) {
    std::vector<int64_t> o(p + 1);
    for (int j = 0; j <= p; ++j) o[j] = static_cast<int64_t>((__int128)j * n / p);
    return o;
  }

  // Indices sorted by |v| descending, index ascending.
  static std::vector<int64_t> order(const std::vector<float>& v) {
    std::vector<int64_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int64_t a, int64_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
    return idx;
  }

  // One call with every rank's gradient; returns the output (sum / P), the same on all ranks.
  std::vector<float> call(const std::vector<std::vector<float>>& g) {
    const auto k = static_cast<int64_t>(std::floor(density * static_cast<double>(n)));
    std::vector<float> out(static_cast<size_t>(n), 0.0f);
    std::vector<std::vector<float>> acc(ranks);
    for (int r = 0; r < ranks; ++r) {
      acc[r].resize(n);
      for (int64_t i = 0; i < n; ++i) acc[r][i] = g[r][i] + residual[r][i];
    }
    if (ranks == 1 || n < min_elements || k < ranks) {
      for (int64_t i = 0; i < n; ++i) {
        float s = 0;
        for (int r = 0; r < ranks; ++r) s += acc[r][i];
        out[i] = s * (1.0f / ranks);
      }
      for (auto& r : residual) r.assign(static_cast<size_t>(n), 0.0f);
      return out;
    }
    const bool exact = calls % tau_prime == 0 || k >= n;
    // Local selections.
    std::vector<std::vector<char>> picked(ranks, std::vector<char>(n, 0));
    std::vector<std::vector<int64_t>> selection(ranks);
    for (int r = 0; r < ranks; ++r) {
      double thr;
      if (exact || !has_lthr) {
        const std::vector<int64_t> o = order(acc[r]);
        thr = std::fabs(static_cast<double>(acc[r][o[k - 1]]));
        for (int64_t j = 0; j < k; ++j) {
          if (acc[r][o[j]] != 0.0f) picked[r][o[j]] = 1;
        }
      } else {
        thr = lthr[r];
        auto count = [&] {
          int64_t c = 0;
          for (float v : acc[r]) c += std::fabs(static_cast<double>(v)) > thr && v != 0.0f;
          return c;
        };
        for (int t = 0; t < 5 && 3 * count() > 4 * k; ++t) thr *= 1.03;
        for (int64_t i = 0; i < n; ++i) {
          picked[r][i] = std::fabs(static_cast<double>(acc[r][i])) > thr && acc[r][i] != 0.0f;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        if (picked[r][i]) selection[r].push_back(i);
      }
      const auto c = static_cast<int64_t>(selection[r].size());
      lthr[r] = 3 * c < 2 * k ? thr / 1.012 : 4 * c > 5 * k ? thr * 1.012 : thr;
    }
    has_lthr = true;
    // Regions.
    if (off.empty()) off = even(n, ranks);
    if (calls % tau == 0) {
      std::vector<int64_t> sums(ranks, 0);
      int64_t voters = 0;
      for (int r = 0; r < ranks; ++r) {
        const auto s = static_cast<int64_t>(selection[r].size());
        if (s < ranks) continue;
        ++voters;
        for (int j = 1; j < ranks; ++j) sums[j] += selection[r][j * (s / ranks)];
      }
      if (voters > 0) {
        for (int j = 1; j < ranks; ++j) off[j] = sums[j] / voters;
      }
    }
    // Region sums, each in the owner's order: own picks, then owner-1, owner-2, ...
    struct E {
      int64_t i;
      float v;
    };
    std::vector<E> survivors;
    for (int q = 0; q < ranks; ++q) {
      for (int64_t i = off[q]; i < off[q + 1]; ++i) {
        float s = 0;
        bool touched = false;
        for (int step = 0; step < ranks; ++step) {
          const int r = (q - step + ranks) % ranks;
          if (picked[r][i]) {
            s += acc[r][i];
            touched = true;
          }
        }
        if (!touched || s == 0.0f) continue;
        if (!(exact || !has_gthr) && !(std::fabs(static_cast<double>(s)) > gthr)) continue;
        survivors.push_back({i, s});
      }
    }
    if (exact || !has_gthr) {
      if (!survivors.empty()) {
        std::stable_sort(survivors.begin(), survivors.end(),
                         [](const E& a, const E& b) { return std::fabs(a.v) > std::fabs(b.v); });
        if (static_cast<int64_t>(survivors.size()) > k) {
          gthr = std::fabs(static_cast<double>(survivors[k - 1].v));
          survivors.resize(k);
        } else {
          gthr = 0;
        }
        has_gthr = true;
      }
    } else {
      const auto c = static_cast<int64_t>(survivors.size());
      gthr = 3 * c < 2 * k ? gthr / 1.008 : 3 * c > 4 * k ? gthr * 1.008 : gthr;
    }
    for (const E& e : survivors) out[e.i] = e.v * (1.0f / ranks);
    for (int r = 0; r < ranks; ++r) {
      residual[r] = acc[r];
      for (const E& e : survivors) {
        if (picked[r][e.i]) residual[r][e.i] = 0.0f;
      }
    }
    ++calls;
    return out;
  }
};

}  // namespace testing
}  // namespace arcreduce
