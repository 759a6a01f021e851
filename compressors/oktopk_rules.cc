#include "compressors/oktopk_rules.h"

#include <algorithm>
#include <cmath>

#include "compressors/kernels/kernels.h"

namespace arcreduce {
namespace oktopk {

int64_t kept_entries(double density, int64_t n) {
  if (n <= 0) return 0;
  const auto k = static_cast<int64_t>(std::floor(density * static_cast<double>(n)));
  return std::min(n, std::max<int64_t>(0, k));
}

std::vector<int64_t> exact_local_selection(const float* x, int64_t n, int64_t k, double* kth) {
  std::vector<int64_t> top(static_cast<size_t>(std::min(n, std::max<int64_t>(0, k))));
  *kth = 0.0;
  if (top.empty()) return top;
  kernels::top_k_abs(x, n, static_cast<int64_t>(top.size()), top.data());
  double smallest = INFINITY;
  for (int64_t i : top) smallest = std::fmin(smallest, std::fabs(static_cast<double>(x[i])));
  *kth = std::isfinite(smallest) ? smallest : 0.0;
  top.erase(std::remove_if(top.begin(), top.end(), [&](int64_t i) { return !(x[i] != 0.0f); }),
            top.end());
  return top;
}

std::vector<int64_t> above(const float* x, int64_t n, double threshold) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(static_cast<double>(x[i])) > threshold && x[i] != 0.0f) out.push_back(i);
  }
  return out;
}

int64_t count_above(const float* x, int64_t n, double threshold) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    count += (std::fabs(static_cast<double>(x[i])) > threshold && x[i] != 0.0f) ? 1 : 0;
  }
  return count;
}

double raise_local_threshold(const float* x, int64_t n, int64_t k, double threshold) {
  for (int tries = 0; tries < kLocalGrowthTries && 3 * count_above(x, n, threshold) > 4 * k;
       ++tries) {
    threshold *= kLocalGrowth;
  }
  return threshold;
}

double nudge_local_threshold(double threshold, int64_t count, int64_t k) {
  if (3 * count < 2 * k) return threshold / kLocalNudge;
  if (4 * count > 5 * k) return threshold * kLocalNudge;
  return threshold;
}

double nudge_global_threshold(double threshold, int64_t count, int64_t k) {
  if (3 * count < 2 * k) return threshold / kGlobalNudge;
  if (3 * count > 4 * k) return threshold * kGlobalNudge;
  return threshold;
}

std::vector<int64_t> even_boundaries(int64_t n, int ranks) {
  std::vector<int64_t> off(static_cast<size_t>(ranks) + 1);
  // j n / P without overflowing: n = q P + rem.
  const int64_t q = n / ranks, rem = n % ranks;
  for (int j = 0; j <= ranks; ++j) off[j] = q * j + rem * j / ranks;
  return off;
}

std::vector<int64_t> boundary_candidates(const std::vector<int64_t>& selection, int ranks) {
  const auto size = static_cast<int64_t>(selection.size());
  if (size < ranks) return {};
  const int64_t c = size / ranks;
  std::vector<int64_t> out;
  for (int64_t j = 1; j < ranks; ++j) out.push_back(selection[static_cast<size_t>(j * c)]);
  return out;
}

std::vector<int64_t> agreed_boundaries(const std::vector<int64_t>& sums, int64_t voters,
                                       const std::vector<int64_t>& previous, int64_t n, int ranks) {
  if (voters <= 0) {
    return previous.size() == static_cast<size_t>(ranks) + 1 ? previous : even_boundaries(n, ranks);
  }
  std::vector<int64_t> off(static_cast<size_t>(ranks) + 1);
  off[0] = 0;
  off[ranks] = n;
  // Each voter's candidates ascend, so their sums and the quotients do; the clamp only guards
  // against a corrupted sum.
  for (int j = 1; j < ranks; ++j) off[j] = std::clamp(sums[j - 1] / voters, off[j - 1], n);
  return off;
}

std::vector<Entry> exact_global_selection(std::vector<Entry> entries, int64_t k, double* kth) {
  *kth = 0.0;
  if (k <= 0) return {};
  if (static_cast<int64_t>(entries.size()) > k) {
    auto larger = [](const Entry& a, const Entry& b) {
      const float ma = std::fabs(a.value), mb = std::fabs(b.value);
      return ma != mb ? ma > mb : a.index < b.index;
    };
    std::nth_element(entries.begin(), entries.begin() + (k - 1), entries.end(), larger);
    *kth = std::fabs(static_cast<double>(entries[static_cast<size_t>(k - 1)].value));
    entries.resize(static_cast<size_t>(k));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.index < b.index; });
  return entries;
}

}  // namespace oktopk
}  // namespace arcreduce
