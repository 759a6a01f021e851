// The CPU build of the kernels: kernels_impl.h instantiated with Thrust's sequential CPP system
// (one thread, the caller's).
#include <thrust/system/cpp/execution_policy.h>

#include <vector>

#include "compressors/kernels/kernels.h"
#include "compressors/kernels/kernels_cpu_avx2.h"
#include "compressors/kernels/kernels_impl.h"

namespace arcreduce {
namespace kernels {

#if !defined(ARC_KERNELS_AVX2)
namespace avx2 {  // not built for this target
bool available() {
  return false;
}
void sketch_transposed(const float*, int64_t, int64_t, const float*, int, float*) {}
}  // namespace avx2
#else
namespace avx2 {
bool available() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
}  // namespace avx2
#endif

namespace {

auto host() {
  return thrust::cpp::par;
}

}  // namespace

void fill_gaussian(uint64_t key, float* out, size_t n) {
  impl::fill_gaussian(host(), key, out, n);
}

void sketch(const float* y, int64_t n, int64_t m, const float* v, int r, float* p) {
  if (n <= 0 || r <= 0) return;
  std::vector<float> vt(static_cast<size_t>(m) * r);
  transpose_projection(v, m, r, vt.data());
  sketch_transposed(y, n, m, vt.data(), r, p);
}
void transpose_projection(const float* v, int64_t m, int r, float* vt) {
  impl::transpose_projection(host(), v, m, r, vt);
}
void fill_gaussian_transposed(uint64_t key, int64_t m, int r, float* vt) {
  impl::fill_gaussian_transposed(host(), key, m, r, vt);
}
void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p) {
  static const bool wide = avx2::available();
  if (wide) return avx2::sketch_transposed(y, n, m, vt, r, p);
  impl::sketch_transposed(host(), y, n, m, vt, r, p);
}
void sketch_row_scores(const float* p, int64_t n, int r, float* scores) {
  impl::sketch_row_scores(host(), p, n, r, scores);
}
void row_sq_norms(const float* y, int64_t n, int64_t m, float* scores) {
  impl::row_sq_norms(host(), y, n, m, scores);
}
void top_k_rows(const float* scores, int64_t n, int64_t k, int64_t* rows) {
  impl::top_k_rows(host(), scores, n, k, rows);
}
void gather_rows(const float* y, int64_t m, const int64_t* rows, int64_t k, float* packed) {
  impl::gather_rows(host(), y, m, rows, k, packed);
}
void scatter_rows(const float* packed, int64_t m, const int64_t* rows, int64_t k, float* y) {
  impl::scatter_rows(host(), packed, m, rows, k, y);
}

namespace detail {
void sketch_transposed_lanes(const float* y, int64_t n, int64_t m, const float* vt, int r,
                             float* p) {
  impl::sketch_transposed_lanes(host(), y, n, m, vt, r, p);
}
void gather_rows_elements(const float* y, int64_t m, const int64_t* rows, int64_t k,
                          float* packed) {
  impl::gather_rows_elements(host(), y, m, rows, k, packed);
}
void scatter_rows_elements(const float* packed, int64_t m, const int64_t* rows, int64_t k,
                           float* y) {
  impl::scatter_rows_elements(host(), packed, m, rows, k, y);
}
void top_k_rows_by_sort(const float* scores, int64_t n, int64_t k, int64_t* rows) {
  impl::top_k_rows_by_sort(host(), scores, n, k, rows);
}
}  // namespace detail

void top_k_abs(const float* x, int64_t n, int64_t k, int64_t* indices) {
  impl::top_k_abs(host(), x, n, k, indices);
}
void gather(const float* x, const int64_t* indices, int64_t k, float* out) {
  impl::gather(host(), x, indices, k, out);
}
void scatter_add(const float* values, const int64_t* indices, int64_t k, float alpha, float* y) {
  impl::scatter_add(host(), values, indices, k, alpha, y);
}
void scatter(const float* values, const int64_t* indices, int64_t k, float* y) {
  impl::scatter(host(), values, indices, k, y);
}

void fill(float* y, size_t n, float value) {
  impl::fill(host(), y, n, value);
}
void scale(float* y, size_t n, float alpha) {
  impl::scale(host(), y, n, alpha);
}
void axpby(float a, const float* x, float b, float* y, size_t n) {
  impl::axpby(host(), a, x, b, y, n);
}
void subtract(const float* x, const float* y, float* out, size_t n) {
  impl::subtract(host(), x, y, out, n);
}
void clear_where_sent(const float* sent, float* u, size_t n) {
  impl::clear_where_sent(host(), sent, u, n);
}
namespace {
// One loop per case, each with restrict pointers so that the compiler vectorises it.
void accumulate_momentum(const float* __restrict g, float* __restrict u, float beta,
                         float* __restrict e, float* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float ui = 1.0f * g[i] + beta * u[i];
    u[i] = ui;
    const float ei = 1.0f * ui + 1.0f * e[i];
    e[i] = ei;
    x[i] = ei;
  }
}
void accumulate_momentum(const float* __restrict g, float* __restrict u, float beta,
                         float* __restrict e, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float ui = 1.0f * g[i] + beta * u[i];
    u[i] = ui;
    e[i] = 1.0f * ui + 1.0f * e[i];
  }
}
void accumulate_gradient(const float* __restrict g, float* __restrict e, float* __restrict x,
                         size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float ei = 1.0f * g[i] + 1.0f * e[i];
    e[i] = ei;
    x[i] = ei;
  }
}
}  // namespace

void accumulate_feedback(const float* g, float* u, float beta, float* e, float* x, size_t n) {
  if (u && x) {
    accumulate_momentum(g, u, beta, e, x, n);
  } else if (u) {
    accumulate_momentum(g, u, beta, e, n);
  } else if (x) {
    accumulate_gradient(g, e, x, n);
  } else {
    axpby(1.0f, g, 1.0f, e, n);
  }
}
void momentum_diff(const float* g, float* v, const float* h, float eta, float* diff, size_t n) {
  impl::momentum_diff(host(), g, v, h, eta, diff, n);
}
void momentum_diff_restart(const float* g, float* v, const float* h, const float* hbar, float eta,
                           float* diff, float* out, size_t n) {
  impl::momentum_diff_restart(host(), g, v, h, hbar, eta, diff, out, n);
}

void to_float(const void* src, DType dtype, float* dst, size_t n) {
  impl::to_float(host(), src, dtype, dst, n);
}
void from_float(const float* src, DType dtype, void* dst, size_t n) {
  impl::from_float(host(), src, dtype, dst, n);
}

uint64_t hash_indices(const int64_t* indices, int64_t k) {
  return impl::hash_indices(host(), indices, k);
}

}  // namespace kernels
}  // namespace arcreduce
