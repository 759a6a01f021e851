// Helpers shared by the kernel tests: naive references and deterministic test data.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace arcreduce {
namespace kernels {
namespace testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (auto& x : out) x = dist(gen);
  return out;
}

// "a ranks before b": larger first, NaN largest, equal values (including -0/+0) tie.
inline bool ranks_before(float a, float b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return a > b;
}

// The k best of `values` under ranks_before with ties to the lower index, sorted ascending.
inline std::vector<int64_t> naive_top_k(const std::vector<float>& values, int64_t k) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return ranks_before(values[a], values[b]); });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

inline std::vector<float> abs_of(std::vector<float> values) {
  for (auto& x : values) x = std::fabs(x);
  return values;
}

}  // namespace testing
}  // namespace kernels
}  // namespace arcreduce
