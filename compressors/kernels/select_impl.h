// Exact, deterministic top-k selection over 32-bit order keys, as Thrust algorithms (no CUB,
// so the same code runs on Thrust's CPP system). Used by top_k_rows and top_k_abs.
//
// Elements are compared by a uint32 key (larger key = larger element, NaN mapped to the largest
// key); equal keys go to the lower index. Instead of sorting all n elements:
//   1. a strided sample (deterministic) is sorted and gives a threshold key t expected to
//      admit about 1.25 k elements;
//   2. one counting pass gives ge = #(key >= t) and gt = #(key > t); t is lowered while ge < k
//      and raised while far too many elements pass;
//   3. if gt < k, t is the k-th largest key: the answer is every element above t plus the
//      lowest-indexed (k - gt) elements equal to t (exact with any number of ties);
//      otherwise the ge candidates (index order) are stable-sorted by key, descending, and the
//      first k kept.
// Work: two passes over the input plus sorts of the sample and of O(k) candidates.
#pragma once

#include <thrust/copy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>
#include <thrust/transform_scan.h>

#include <algorithm>
#include <cstdint>

#include "compressors/kernels/temp_buffer.h"
#include "ops/half.h"

// Host and CUDA instantiations of these templates live in different libraries that may share a
// process; an inline namespace per compiler keeps their symbols apart.
#ifndef ARC_KERNELS_ABI
#if defined(__CUDACC__)
#define ARC_KERNELS_ABI cuda_v1
#else
#define ARC_KERNELS_ABI host_v1
#endif
#endif

namespace arcreduce {
namespace kernels {
namespace impl {
inline namespace ARC_KERNELS_ABI {

constexpr uint32_t kNanKey = 0xffffffffu;

ARC_HOST_DEVICE inline bool is_nan_bits(uint32_t bits) {
  return (bits & 0x7fffffffu) > 0x7f800000u;
}

// Signed order: -inf < ... < -0 == +0 < ... < +inf < NaN.
struct OrderKey {
  const float* x;
  ARC_HOST_DEVICE uint32_t operator()(int64_t i) const {
    uint32_t bits = float_bits(x[i]);
    if (is_nan_bits(bits)) return kNanKey;
    if (bits == 0x80000000u) bits = 0;  // -0 ties with +0
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  }
};

// Magnitude order: |x|, NaN largest.
struct AbsKey {
  const float* x;
  ARC_HOST_DEVICE uint32_t operator()(int64_t i) const {
    const uint32_t bits = float_bits(x[i]);
    return is_nan_bits(bits) ? kNanKey : (bits & 0x7fffffffu);
  }
};

struct KeyCounts {
  int64_t ge, gt;
};
template <class KeyOf>
struct CountAgainst {
  KeyOf key_of;
  uint32_t t;
  ARC_HOST_DEVICE KeyCounts operator()(int64_t i) const {
    const uint32_t key = key_of(i);
    return KeyCounts{key >= t ? 1 : 0, key > t ? 1 : 0};
  }
};
struct AddCounts {
  ARC_HOST_DEVICE KeyCounts operator()(KeyCounts a, KeyCounts b) const {
    return KeyCounts{a.ge + b.ge, a.gt + b.gt};
  }
};
template <class KeyOf>
struct KeyAtLeast {
  KeyOf key_of;
  uint32_t t;
  ARC_HOST_DEVICE bool operator()(int64_t i) const { return key_of(i) >= t; }
};
template <class KeyOf>
struct KeyEquals {
  KeyOf key_of;
  uint32_t t;
  ARC_HOST_DEVICE int64_t operator()(int64_t i) const { return key_of(i) == t ? 1 : 0; }
};
// Candidate j survives if it is above t or among the first `need` equal to t.
template <class KeyOf>
struct KeepTied {
  KeyOf key_of;
  uint32_t t;
  const int64_t* candidates;
  const int64_t* equal_rank;
  int64_t need;
  ARC_HOST_DEVICE bool operator()(int64_t j) const {
    return key_of(candidates[j]) != t || equal_rank[j] < need;
  }
};
// Descending order through an ascending sort: invert the key.
template <class KeyOf>
struct InvertedKey {
  KeyOf key_of;
  ARC_HOST_DEVICE uint32_t operator()(int64_t i) const { return ~key_of(i); }
};
// keys[i] = ~key, order[i] = i: the sort's input in one pass.
template <class KeyOf>
struct InvertedKeyAndIndex {
  KeyOf key_of;
  uint32_t* keys;
  int64_t* order;
  ARC_HOST_DEVICE void operator()(int64_t i) const {
    keys[i] = ~key_of(i);
    order[i] = i;
  }
};
template <class KeyOf>
struct SampleKey {
  KeyOf key_of;
  int64_t stride;
  ARC_HOST_DEVICE uint32_t operator()(int64_t j) const { return ~key_of(j * stride); }
};
struct AddI64 {
  ARC_HOST_DEVICE int64_t operator()(int64_t a, int64_t b) const { return a + b; }
};
struct MaxU32 {
  ARC_HOST_DEVICE uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};

// Below this size the sample is skipped: every element is a candidate.
constexpr int64_t kSelectDirectBelow = 2048;
constexpr int64_t kSampleSize = 4096;

// Sample rank whose key should admit about 1.25 k + slack elements.
inline int64_t initial_sample_rank(int64_t n, int64_t s, int64_t k) {
  const double expected = 1.25 * static_cast<double>(k) * static_cast<double>(s) / n;
  return static_cast<int64_t>(expected) + 4;
}

// k <= 0 selects nothing and k >= n every index, in order; true when one of them settled it.
template <class Exec>
bool select_all_or_nothing(Exec& exec, int64_t n, int64_t k, int64_t* out) {
  if (k <= 0) return true;
  if (k < n) return false;
  thrust::sequence(exec, out, out + n);
  return true;
}

template <class Exec, class KeyOf>
void select_top_k(Exec& exec, KeyOf key_of, int64_t n, int64_t k, int64_t* out) {
  using thrust::counting_iterator;
  if (select_all_or_nothing(exec, n, k, out)) return;
  // Sorted sample of inverted keys: sample[q] is the (q+1)-th largest sampled key, inverted.
  const int64_t s = n < kSelectDirectBelow ? 0 : std::min(kSampleSize, n / 4);
  auto sample = make_temp<uint32_t>(exec, s);
  if (s > 0) {
    thrust::transform(exec, counting_iterator<int64_t>(0), counting_iterator<int64_t>(s),
                      sample.get(), SampleKey<KeyOf>{key_of, n / s});
    thrust::sort(exec, sample.get(), sample.get() + s);
  }
  auto threshold_at = [&](int64_t q) -> uint32_t {
    if (q >= s) return 0u;  // admits everything
    return ~thrust::reduce(exec, sample.get() + q, sample.get() + q + 1, 0u, MaxU32{});
  };

  int64_t q = s > 0 ? initial_sample_rank(n, s, k) : 0;
  const int64_t budget = 4 * k + 4096;
  uint32_t t = 0;
  KeyCounts counts{};
  for (int attempt = 0;; ++attempt) {
    t = threshold_at(q);
    counts =
        thrust::transform_reduce(exec, counting_iterator<int64_t>(0), counting_iterator<int64_t>(n),
                                 CountAgainst<KeyOf>{key_of, t}, KeyCounts{0, 0}, AddCounts{});
    if (counts.ge < k) {  // threshold too high; t == 0 always passes, so this terminates
      q = 2 * q + 16;
    } else if (counts.gt >= k && counts.ge > budget && q > 0 && attempt < 4) {
      q /= 2;  // far too many candidates: try a higher threshold
    } else {
      break;
    }
  }

  auto candidates = make_temp<int64_t>(exec, counts.ge);
  thrust::copy_if(exec, counting_iterator<int64_t>(0), counting_iterator<int64_t>(n),
                  candidates.get(), KeyAtLeast<KeyOf>{key_of, t});
  if (counts.gt < k) {
    // t is the k-th largest key; ties at t are taken in index order.
    auto rank = make_temp<int64_t>(exec, counts.ge);
    thrust::transform_exclusive_scan(exec, candidates.get(), candidates.get() + counts.ge,
                                     rank.get(), KeyEquals<KeyOf>{key_of, t}, int64_t{0}, AddI64{});
    thrust::copy_if(exec, candidates.get(), candidates.get() + counts.ge,
                    counting_iterator<int64_t>(0), out,
                    KeepTied<KeyOf>{key_of, t, candidates.get(), rank.get(), k - counts.gt});
    return;
  }
  auto keys = make_temp<uint32_t>(exec, counts.ge);
  thrust::transform(exec, candidates.get(), candidates.get() + counts.ge, keys.get(),
                    InvertedKey<KeyOf>{key_of});
  thrust::stable_sort_by_key(exec, keys.get(), keys.get() + counts.ge, candidates.get());
  thrust::copy(exec, candidates.get(), candidates.get() + k, out);
  thrust::sort(exec, out, out + k);
}

// The same selection by one stable sort of all n keys (descending through inverted keys, so
// equal keys stay in index order), for a GPU: nothing it computes has to reach the host, so the
// stream is never synchronised, where select_top_k reads counts back several times (each read
// back waits for the whole stream, which costs more than the kernels themselves on a GPU).
// O(n log n) work on a CPU, so the CPU build keeps select_top_k.
template <class Exec, class KeyOf>
void select_top_k_by_sort(Exec& exec, KeyOf key_of, int64_t n, int64_t k, int64_t* out) {
  using thrust::counting_iterator;
  if (select_all_or_nothing(exec, n, k, out)) return;
  auto keys = make_temp<uint32_t>(exec, n);
  auto order = make_temp<int64_t>(exec, n);
  thrust::for_each(exec, counting_iterator<int64_t>(0), counting_iterator<int64_t>(n),
                   InvertedKeyAndIndex<KeyOf>{key_of, keys.get(), order.get()});
  thrust::stable_sort_by_key(exec, keys.get(), keys.get() + n, order.get());
  thrust::copy(exec, order.get(), order.get() + k, out);
  thrust::sort(exec, out, out + k);
}

}  // namespace ARC_KERNELS_ABI
}  // namespace impl
}  // namespace kernels
}  // namespace arcreduce
