// The kernels of kernels.h, written once as templates over a Thrust execution policy. The CPU
// build (kernels_cpu.cc) instantiates them with thrust::cpp::par, the CUDA build
// (kernels_cuda.cu) with thrust::cuda::par_nosync.on(stream); pointers belong to the policy's
// system. Functors are ARC_HOST_DEVICE and touch only what they are given.
//
// Performance notes (CPU): loops inside functors keep a fixed number of independent partial
// sums, combined in a fixed order, so that g++ vectorises them without -ffast-math and the
// result does not depend on the compiler's choices. Per-row functors suit the CPU (one row is a
// contiguous stream); for the sketch and the row copies the CUDA build runs the *_lanes and
// *_elements variants below instead, the same arithmetic laid out for coalesced reads.
#pragma once

#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/gather.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/scatter.h>
#include <thrust/system/cpp/execution_policy.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "arcreduce/types.h"
#include "compressors/kernels/philox.h"
#include "compressors/kernels/select_impl.h"
#include "ops/half.h"

namespace arcreduce {
namespace kernels {
namespace impl {
inline namespace ARC_KERNELS_ABI {

template <class T>
thrust::counting_iterator<T> count_from(T first) {
  return thrust::counting_iterator<T>(first);
}

// f(i) for i in [0, n). On Thrust's sequential CPU system a plain loop marked ivdep, so that g++
// vectorises functors over several pointers that may alias (the output of an in-place update is
// its input): only for functors that read and write index i alone. Elsewhere thrust::for_each.
// (The sequential loop also keeps Thrust's code out of the AVX2 build of the sketch,
// kernels_cpu_avx2.cc, whose instantiations must all live in its own ABI namespace.)
template <class Exec, class Index, class F>
void for_each_index(Exec&& exec, Index n, F f) {
  using Sequential = std::decay_t<decltype(thrust::cpp::par)>;
  if constexpr (std::is_same_v<std::decay_t<Exec>, Sequential>) {
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC ivdep
#endif
    for (Index i = 0; i < n; ++i) f(i);
  } else {
    thrust::for_each(exec, count_from<Index>(0), count_from(n), f);
  }
}

// --- randomness ------------------------------------------------------------------------------

// One Philox block gives four Gaussians: elements 4b..4b+3 of the stream.
ARC_HOST_DEVICE inline void gaussian_block(uint64_t key, uint64_t block, float* z) {
  const Philox4x32 bits = philox_block(key, kDomainGaussian, block);
  box_muller(bits.v[0], bits.v[1], &z[0], &z[1]);
  box_muller(bits.v[2], bits.v[3], &z[2], &z[3]);
}

struct GaussianBlock {
  uint64_t key;
  float* out;
  uint64_t n;
  ARC_HOST_DEVICE void operator()(uint64_t block) const {
    float z[4];
    gaussian_block(key, block, z);
    const uint64_t base = block * 4;
    for (uint64_t j = 0; j < 4 && base + j < n; ++j) out[base + j] = z[j];
  }
};

// The stream's element e = i * r + c (row i, column c of an m x r projection) written to
// vt[c * m + i]: fill_gaussian and transpose_projection in one pass.
struct GaussianBlockTransposed {
  uint64_t key;
  float* vt;
  uint64_t m;
  uint64_t r;
  ARC_HOST_DEVICE void operator()(uint64_t block) const {
    float z[4];
    gaussian_block(key, block, z);
    const uint64_t base = block * 4;
    for (uint64_t j = 0; j < 4 && base + j < m * r; ++j) {
      const uint64_t e = base + j;
      vt[(e % r) * m + e / r] = z[j];
    }
  }
};

template <class Exec>
void fill_gaussian(Exec&& exec, uint64_t key, float* out, size_t n) {
  const uint64_t blocks = (static_cast<uint64_t>(n) + 3) / 4;
  thrust::for_each(exec, count_from<uint64_t>(0), count_from(blocks), GaussianBlock{key, out, n});
}

template <class Exec>
void fill_gaussian_transposed(Exec&& exec, uint64_t key, int64_t m, int r, float* vt) {
  if (m <= 0 || r <= 0) return;
  const uint64_t um = static_cast<uint64_t>(m), ur = static_cast<uint64_t>(r);
  thrust::for_each(exec, count_from<uint64_t>(0), count_from((um * ur + 3) / 4),
                   GaussianBlockTransposed{key, vt, um, ur});
}

// --- ARC-Top-K -------------------------------------------------------------------------------

// Dot products keep kLanes independent partial sums, combined by a fixed tree: deterministic,
// and vectorised by g++ without -ffast-math. 32 lanes are four AVX registers (eight SSE ones):
// enough independent chains to hide the add or FMA latency, which one register's worth is not.
constexpr int kLanes = 32;

// Sums acc[0..kLanes) pairwise (acc[l] += acc[l + w] for w = 16, 8, 4, 2, 1); destroys acc.
// Spelled out so that every step has a constant trip count the compiler unrolls.
ARC_HOST_DEVICE inline float sum_lanes(float* acc) {
  static_assert(kLanes == 32, "sum_lanes spells out the tree for 32 lanes");
  for (int l = 0; l < 16; ++l) acc[l] += acc[l + 16];
  for (int l = 0; l < 8; ++l) acc[l] += acc[l + 8];
  for (int l = 0; l < 4; ++l) acc[l] += acc[l + 4];
  for (int l = 0; l < 2; ++l) acc[l] += acc[l + 2];
  return acc[0] + acc[1];
}

// sum_i a[i] * b[i] over n values, in kLanes partial sums.
ARC_HOST_DEVICE inline float dot_lanes(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return sum_lanes(acc);
}

// vt (r x m) = transpose of v (m x r), so that each column of v is contiguous.
struct Transpose {
  const float* v;
  int64_t m;
  int r;
  float* vt;
  ARC_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t i = e / r, c = e % r;
    vt[c * m + i] = v[e];
  }
};

// One row of p = y v: r dot products of the row (read from cache after the first) with the
// contiguous columns vt[c].
struct SketchRow {
  const float* y;
  int64_t m;
  const float* vt;
  int r;
  float* p;
  ARC_HOST_DEVICE void operator()(int64_t row) const {
    const float* yr = y + row * m;
    int c = 0;
    for (; c + 2 <= r; c += 2) {  // two columns per pass: each load of y feeds two FMAs
      const float* v0 = vt + c * m;
      const float* v1 = v0 + m;
      float acc0[kLanes] = {}, acc1[kLanes] = {};
      int64_t i = 0;
      for (; i + kLanes <= m; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          acc0[l] += yr[i + l] * v0[i + l];
          acc1[l] += yr[i + l] * v1[i + l];
        }
      }
      for (int l = 0; i < m; ++i, ++l) {
        acc0[l] += yr[i] * v0[i];
        acc1[l] += yr[i] * v1[i];
      }
      p[row * r + c] = sum_lanes(acc0);
      p[row * r + c + 1] = sum_lanes(acc1);
    }
    for (; c < r; ++c) p[row * r + c] = dot_lanes(yr, vt + c * m, m);
  }
};

template <class Exec>
void transpose_projection(Exec&& exec, const float* v, int64_t m, int r, float* vt) {
  if (m <= 0 || r <= 0) return;
  thrust::for_each(exec, count_from<int64_t>(0), count_from(m * r), Transpose{v, m, r, vt});
}

template <class Exec>
void sketch_transposed(Exec&& exec, const float* y, int64_t n, int64_t m, const float* vt, int r,
                       float* p) {
  if (n <= 0 || r <= 0) return;
  for_each_index(exec, n, SketchRow{y, m, vt, r, p});
}

// The sketch laid out for a GPU. SketchRow gives a thread a whole row: a warp's 32 threads read
// 32 rows at once (strided, uncoalesced), and a matrix of a few thousand rows keeps only a few
// thousand threads busy, each walking its row in series. Here thread (row, lane) sums lane `lane`
// of every column's dot product (elements lane, lane + kLanes, ... of the row, in order:
// SketchRow's acc[lane]), so adjacent threads read adjacent values; a second pass adds each (row,
// column)'s kLanes sums with sum_lanes' tree. The same operations in the same order as SketchRow:
// bit-identical to it on one system (kernels_tests compares them on the CPU).
struct SketchLanePartials {
  const float* y;
  int64_t m;
  const float* vt;
  int r;
  float* partial;  // (n * r) x kLanes
  ARC_HOST_DEVICE void operator()(int64_t t) const {
    const int64_t row = t / kLanes;
    const int lane = static_cast<int>(t % kLanes);
    const float* yr = y + row * m;
    for (int c = 0; c < r; ++c) {
      const float* vc = vt + c * m;
      float acc = 0.0f;
      for (int64_t i = lane; i < m; i += kLanes) acc += yr[i] * vc[i];
      partial[(row * r + c) * kLanes + lane] = acc;
    }
  }
};
struct SumLanePartials {
  const float* partial;
  float* p;
  ARC_HOST_DEVICE void operator()(int64_t e) const {
    float acc[kLanes];
    for (int l = 0; l < kLanes; ++l) acc[l] = partial[e * kLanes + l];
    p[e] = sum_lanes(acc);
  }
};

template <class Exec>
void sketch_transposed_lanes(Exec&& exec, const float* y, int64_t n, int64_t m, const float* vt,
                             int r, float* p) {
  if (n <= 0 || r <= 0) return;
  auto partial = make_temp<float>(exec, n * r * kLanes);
  thrust::for_each(exec, count_from<int64_t>(0), count_from(n * kLanes),
                   SketchLanePartials{y, m, vt, r, partial.get()});
  thrust::for_each(exec, count_from<int64_t>(0), count_from(n * r),
                   SumLanePartials{partial.get(), p});
}

template <class Exec>
void sketch(Exec&& exec, const float* y, int64_t n, int64_t m, const float* v, int r, float* p) {
  if (n <= 0 || r <= 0) return;
  auto vt = make_temp<float>(exec, m * r);
  transpose_projection(exec, v, m, r, vt.get());
  sketch_transposed(exec, y, n, m, vt.get(), r, p);
}

// The scores are computed without contraction (portable_math.h's single IEEE operations), so
// the CPU and CUDA builds give bit-identical scores for the same input. Every rank scores the
// same All-Reduced sketch (or, on the exact path, the same All-Reduced tensor), so this keeps the
// selection identical on all ranks even when they run different builds; the sketch itself may
// differ between builds (FMA) since it only enters the sum. Both kernels are memory bound, so the
// separate multiply and add are not expected to cost anything measurable (the CPU build compiles
// to the same code as before: it has no FMA; not measured on a GPU).
struct SketchScore {
  const float* p;
  int r;
  ARC_HOST_DEVICE float operator()(int64_t row) const {
    float sum = 0.0f;
    for (int c = 0; c < r; ++c) {
      sum = portable::add_rn(sum, portable::mul_rn(p[row * r + c], p[row * r + c]));
    }
    return sum;
  }
};

template <class Exec>
void sketch_row_scores(Exec&& exec, const float* p, int64_t n, int r, float* scores) {
  thrust::transform(exec, count_from<int64_t>(0), count_from(n), scores, SketchScore{p, r});
}

// sum_c y[row, c]^2 in the lanes and order of dot_lanes, without contraction (see SketchScore).
struct RowSqNorm {
  const float* y;
  int64_t m;
  ARC_HOST_DEVICE float operator()(int64_t row) const {
    const float* yr = y + row * m;
    float acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        acc[l] = portable::add_rn(acc[l], portable::mul_rn(yr[i + l], yr[i + l]));
      }
    }
    for (int l = 0; i < m; ++i, ++l) {
      acc[l] = portable::add_rn(acc[l], portable::mul_rn(yr[i], yr[i]));
    }
    return sum_lanes(acc);
  }
};

template <class Exec>
void row_sq_norms(Exec&& exec, const float* y, int64_t n, int64_t m, float* scores) {
  thrust::transform(exec, count_from<int64_t>(0), count_from(n), scores, RowSqNorm{y, m});
}

template <class Exec>
void top_k_rows(Exec&& exec, const float* scores, int64_t n, int64_t k, int64_t* rows) {
  select_top_k(exec, OrderKey{scores}, n, k, rows);
}
template <class Exec>
void top_k_rows_by_sort(Exec&& exec, const float* scores, int64_t n, int64_t k, int64_t* rows) {
  select_top_k_by_sort(exec, OrderKey{scores}, n, k, rows);
}

// Copies row rows[j] of `from` to row j of `to` (gather) or the reverse (scatter).
template <bool kGather>
struct CopyRow {
  const float* from;
  float* to;
  int64_t m;
  const int64_t* rows;
  ARC_HOST_DEVICE void operator()(int64_t j) const {
    const float* src = from + (kGather ? rows[j] : j) * m;
    float* dst = to + (kGather ? j : rows[j]) * m;
    for (int64_t c = 0; c < m; ++c) dst[c] = src[c];
  }
};

// CopyRow with one thread per element instead of per row: on a GPU adjacent threads then copy
// adjacent values, and k rows give k * m threads, not k.
template <bool kGather>
struct CopyRowElement {
  const float* from;
  float* to;
  int64_t m;
  const int64_t* rows;
  ARC_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t j = e / m, c = e % m;
    const int64_t src = (kGather ? rows[j] : j) * m + c;
    const int64_t dst = (kGather ? j : rows[j]) * m + c;
    to[dst] = from[src];
  }
};

template <class Exec>
void gather_rows(Exec&& exec, const float* y, int64_t m, const int64_t* rows, int64_t k,
                 float* packed) {
  thrust::for_each(exec, count_from<int64_t>(0), count_from(k), CopyRow<true>{y, packed, m, rows});
}

template <class Exec>
void scatter_rows(Exec&& exec, const float* packed, int64_t m, const int64_t* rows, int64_t k,
                  float* y) {
  thrust::for_each(exec, count_from<int64_t>(0), count_from(k), CopyRow<false>{packed, y, m, rows});
}

template <class Exec>
void gather_rows_elements(Exec&& exec, const float* y, int64_t m, const int64_t* rows, int64_t k,
                          float* packed) {
  if (k <= 0 || m <= 0) return;
  thrust::for_each(exec, count_from<int64_t>(0), count_from(k * m),
                   CopyRowElement<true>{y, packed, m, rows});
}

template <class Exec>
void scatter_rows_elements(Exec&& exec, const float* packed, int64_t m, const int64_t* rows,
                           int64_t k, float* y) {
  if (k <= 0 || m <= 0) return;
  thrust::for_each(exec, count_from<int64_t>(0), count_from(k * m),
                   CopyRowElement<false>{packed, y, m, rows});
}

// --- element selection -----------------------------------------------------------------------

template <class Exec>
void top_k_abs(Exec&& exec, const float* x, int64_t n, int64_t k, int64_t* indices) {
  select_top_k(exec, AbsKey{x}, n, k, indices);
}

template <class Exec>
void gather(Exec&& exec, const float* x, const int64_t* indices, int64_t k, float* out) {
  thrust::gather(exec, indices, indices + k, x, out);
}

struct ScatterAdd {
  const float* values;
  const int64_t* indices;
  float alpha;
  float* y;
  ARC_HOST_DEVICE void operator()(int64_t i) const { y[indices[i]] += alpha * values[i]; }
};

template <class Exec>
void scatter_add(Exec&& exec, const float* values, const int64_t* indices, int64_t k, float alpha,
                 float* y) {
  thrust::for_each(exec, count_from<int64_t>(0), count_from(k),
                   ScatterAdd{values, indices, alpha, y});
}

template <class Exec>
void scatter(Exec&& exec, const float* values, const int64_t* indices, int64_t k, float* y) {
  thrust::scatter(exec, values, values + k, indices, y);
}

// --- element-wise ----------------------------------------------------------------------------

struct Scale {
  float alpha;
  ARC_HOST_DEVICE float operator()(float y) const { return alpha * y; }
};
struct Axpby {
  float a, b;
  ARC_HOST_DEVICE float operator()(float x, float y) const { return a * x + b * y; }
};
struct Minus {
  ARC_HOST_DEVICE float operator()(float x, float y) const { return x - y; }
};
struct ClearWhereSent {
  ARC_HOST_DEVICE float operator()(float sent, float u) const { return sent != 0.0f ? 0.0f : u; }
};

template <class Exec>
void fill(Exec&& exec, float* y, size_t n, float value) {
  thrust::fill(exec, y, y + n, value);
}
template <class Exec>
void scale(Exec&& exec, float* y, size_t n, float alpha) {
  thrust::transform(exec, y, y + n, y, Scale{alpha});
}
template <class Exec>
void axpby(Exec&& exec, float a, const float* x, float b, float* y, size_t n) {
  thrust::transform(exec, x, x + n, y, y, Axpby{a, b});
}
template <class Exec>
void subtract(Exec&& exec, const float* x, const float* y, float* out, size_t n) {
  thrust::transform(exec, x, x + n, y, out, Minus{});
}
template <class Exec>
void clear_where_sent(Exec&& exec, const float* sent, float* u, size_t n) {
  thrust::transform(exec, sent, sent + n, u, u, ClearWhereSent{});
}

struct MomentumDiff {
  const float* g;
  float* v;
  const float* h;
  float* diff;
  float eta;
  ARC_HOST_DEVICE void operator()(size_t i) const {
    const float vi = (1.0f - eta) * v[i] + eta * g[i];
    v[i] = vi;
    diff[i] = vi - h[i];
  }
};
// MomentumDiff plus out[i] = hbar[i] in the same pass; out may alias g (read first).
struct MomentumDiffRestart {
  const float* g;
  float* v;
  const float* h;
  const float* hbar;
  float* diff;
  float* out;
  float eta;
  ARC_HOST_DEVICE void operator()(size_t i) const {
    const float vi = (1.0f - eta) * v[i] + eta * g[i];
    v[i] = vi;
    diff[i] = vi - h[i];
    out[i] = hbar[i];
  }
};
template <class Exec>
void momentum_diff_restart(Exec&& exec, const float* g, float* v, const float* h, const float* hbar,
                           float eta, float* diff, float* out, size_t n) {
  for_each_index(exec, n, MomentumDiffRestart{g, v, h, hbar, diff, out, eta});
}

template <class Exec>
void momentum_diff(Exec&& exec, const float* g, float* v, const float* h, float eta, float* diff,
                   size_t n) {
  for_each_index(exec, n, MomentumDiff{g, v, h, diff, eta});
}

// --- casts -----------------------------------------------------------------------------------

struct Fp16ToFloat {
  ARC_HOST_DEVICE float operator()(uint16_t h) const { return fp16_to_float(h); }
};
struct Bf16ToFloat {
  ARC_HOST_DEVICE float operator()(uint16_t b) const { return bf16_to_float(b); }
};
struct DoubleToFloat {
  ARC_HOST_DEVICE float operator()(double d) const { return static_cast<float>(d); }
};
struct FloatToFp16 {
  ARC_HOST_DEVICE uint16_t operator()(float f) const { return float_to_fp16(f); }
};
struct FloatToBf16 {
  ARC_HOST_DEVICE uint16_t operator()(float f) const { return float_to_bf16(f); }
};
struct FloatToDouble {
  ARC_HOST_DEVICE double operator()(float f) const { return f; }
};

template <class Exec>
void to_float(Exec&& exec, const void* src, DType dtype, float* dst, size_t n) {
  switch (dtype) {
    case DType::kFloat32: {
      const auto* s = static_cast<const float*>(src);
      thrust::copy(exec, s, s + n, dst);
      return;
    }
    case DType::kFloat64: {
      const auto* s = static_cast<const double*>(src);
      thrust::transform(exec, s, s + n, dst, DoubleToFloat{});
      return;
    }
    case DType::kFloat16: {
      const auto* s = static_cast<const uint16_t*>(src);
      thrust::transform(exec, s, s + n, dst, Fp16ToFloat{});
      return;
    }
    case DType::kBFloat16: {
      const auto* s = static_cast<const uint16_t*>(src);
      thrust::transform(exec, s, s + n, dst, Bf16ToFloat{});
      return;
    }
    default:  // integer dtypes are only broadcast, never compressed
      return;
  }
}

template <class Exec>
void from_float(Exec&& exec, const float* src, DType dtype, void* dst, size_t n) {
  switch (dtype) {
    case DType::kFloat32:
      thrust::copy(exec, src, src + n, static_cast<float*>(dst));
      return;
    case DType::kFloat64:
      thrust::transform(exec, src, src + n, static_cast<double*>(dst), FloatToDouble{});
      return;
    case DType::kFloat16:
      thrust::transform(exec, src, src + n, static_cast<uint16_t*>(dst), FloatToFp16{});
      return;
    case DType::kBFloat16:
      thrust::transform(exec, src, src + n, static_cast<uint16_t*>(dst), FloatToBf16{});
      return;
    default:  // integer dtypes are only broadcast, never compressed
      return;
  }
}

// --- consistency hash ------------------------------------------------------------------------

// Term j mixes the position with the index, so the (commutative, exactly associative) wrapping
// sum of terms is order sensitive yet reducible in parallel in any order.
struct IndexHashTerm {
  const int64_t* indices;
  ARC_HOST_DEVICE uint64_t operator()(int64_t j) const {
    return mix64(static_cast<uint64_t>(indices[j]) ^ mix64(static_cast<uint64_t>(j)));
  }
};
struct AddU64 {
  ARC_HOST_DEVICE uint64_t operator()(uint64_t a, uint64_t b) const { return a + b; }
};

template <class Exec>
uint64_t hash_indices(Exec&& exec, const int64_t* indices, int64_t k) {
  const uint64_t sum = thrust::transform_reduce(exec, count_from<int64_t>(0), count_from(k),
                                                IndexHashTerm{indices}, uint64_t{0}, AddU64{});
  return mix64(sum ^ mix64(static_cast<uint64_t>(k) + 0x5bd1e995ull));
}

}  // namespace ARC_KERNELS_ABI
}  // namespace impl
}  // namespace kernels
}  // namespace arcreduce
