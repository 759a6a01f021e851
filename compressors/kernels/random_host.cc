// Host-only randomness of kernels.h: stream keys and Rand-K index sets.
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "compressors/kernels/philox.h"

namespace arcreduce {
namespace kernels {
namespace {

// FNV-1a, 64-bit, over the bytes of the name.
uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Draws uniform integers in [0, bound) from stream kDomainSample of `key`, one Philox block
// (64 of its 128 bits) per draw, by Lemire's multiply-and-reject (no modulo bias).
class UniformDraws {
 public:
  explicit UniformDraws(uint64_t key) : key_(key) {}

  uint64_t below(uint64_t bound) {
    unsigned __int128 product = static_cast<unsigned __int128>(next()) * bound;
    uint64_t low = static_cast<uint64_t>(product);
    if (low < bound) {
      const uint64_t reject_below = (0 - bound) % bound;  // 2^64 mod bound
      while (low < reject_below) {
        product = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<uint64_t>(product);
      }
    }
    return static_cast<uint64_t>(product >> 64);
  }

 private:
  uint64_t next() {
    const Philox4x32 bits = philox_block(key_, kDomainSample, block_++);
    return (static_cast<uint64_t>(bits.v[1]) << 32) | bits.v[0];
  }

  uint64_t key_;
  uint64_t block_ = 0;
};

}  // namespace

uint64_t philox_key(uint64_t seed, std::string_view tensor_name, uint64_t step) {
  return mix64(mix64(mix64(seed) ^ fnv1a64(tensor_name)) ^ step);
}

// Floyd's algorithm: for j = n-k .. n-1 draw t in [0, j]; take t, or j if t is already taken.
// Every k-subset is equally likely; k draws (plus rare rejections) whatever n is. Membership
// lives in a hash set when k is small against n, else in a bitmap of n bits, which is also
// read out in ascending order without sorting: the set, hence the output, is the same.
void sample_indices(uint64_t key, int64_t n, int64_t k, int64_t* out) {
  // The bitmap (n / 8 bytes, read in n / 64 steps) costs no more than the set would.
  detail::sample_indices_floyd(key, n, k, out, k >= n / 64);
}

namespace detail {

void sample_indices_floyd(uint64_t key, int64_t n, int64_t k, int64_t* out, bool bitmap) {
  if (k <= 0) return;
  UniformDraws draws(key);
  if (bitmap) {
    std::vector<uint64_t> taken(static_cast<size_t>((n + 63) / 64), 0);
    auto take = [&](int64_t i) {
      uint64_t& word = taken[static_cast<size_t>(i >> 6)];
      const uint64_t bit = uint64_t{1} << (i & 63);
      const bool fresh = (word & bit) == 0;
      word |= bit;
      return fresh;
    };
    for (int64_t j = n - k; j < n; ++j) {
      const auto t = static_cast<int64_t>(draws.below(static_cast<uint64_t>(j) + 1));
      if (!take(t)) take(j);
    }
    int64_t count = 0;
    for (size_t w = 0; w < taken.size(); ++w) {
      for (uint64_t word = taken[w]; word != 0; word &= word - 1) {
        out[count++] = static_cast<int64_t>(w * 64) + __builtin_ctzll(word);
      }
    }
    return;
  }
  std::unordered_set<int64_t> taken;
  taken.reserve(static_cast<size_t>(2 * k));
  int64_t count = 0;
  for (int64_t j = n - k; j < n; ++j) {
    const auto t = static_cast<int64_t>(draws.below(static_cast<uint64_t>(j) + 1));
    const int64_t pick = taken.insert(t).second ? t : j;
    if (pick == j) taken.insert(j);
    out[count++] = pick;
  }
  std::sort(out, out + k);
}

}  // namespace detail
}  // namespace kernels
}  // namespace arcreduce
