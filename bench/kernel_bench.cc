// Throughput of the CPU kernels (compressors/kernels) against memcpy of the same buffer.
// GB/s counts bytes of gradient processed per call (n x m fp32 for the row kernels, n fp32 for
// the element kernels); gather/scatter count the rows or elements they move. Not a test: run
//   kernel_bench [--benchmark_filter=Arc] [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "compressors/kernels/kernels.h"

namespace arcreduce {
namespace kernels {
namespace {

constexpr int kSketchRank = 4;

std::vector<float> gaussian(size_t n, uint64_t step) {
  std::vector<float> out(n);
  fill_gaussian(philox_key(1, "bench", step), out.data(), n);
  return out;
}

int64_t one_percent(int64_t n) {
  return std::max<int64_t>(1, n / 100);
}

// One gradient matrix with its projection and every output buffer of the ARC pipeline.
struct ArcCase {
  int64_t n, m, k;
  std::vector<float> y, v, p, scores, packed;
  std::vector<int64_t> rows;
  explicit ArcCase(const benchmark::State& state)
      : n(state.range(0)),
        m(state.range(1)),
        k(one_percent(n)),
        y(gaussian(n * m, 0)),
        v(gaussian(m * kSketchRank, 1)),
        p(n * kSketchRank),
        scores(n),
        packed(k * m),
        rows(k) {}
  int64_t bytes() const { return n * m * static_cast<int64_t>(sizeof(float)); }
  void select() {
    sketch_row_scores(p.data(), n, kSketchRank, scores.data());
    top_k_rows(scores.data(), n, k, rows.data());
  }
};

void BM_Memcpy(benchmark::State& state) {
  ArcCase c(state);
  std::vector<float> dst(c.y.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), c.y.data(), c.bytes());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.bytes());
}

void BM_Sketch(benchmark::State& state) {
  ArcCase c(state);
  for (auto _ : state) {
    sketch(c.y.data(), c.n, c.m, c.v.data(), kSketchRank, c.p.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.bytes());
}

void BM_RowScoresTopKRows(benchmark::State& state) {
  ArcCase c(state);
  sketch(c.y.data(), c.n, c.m, c.v.data(), kSketchRank, c.p.data());
  for (auto _ : state) {
    c.select();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.bytes());
}

void BM_GatherRows(benchmark::State& state) {
  ArcCase c(state);
  sketch(c.y.data(), c.n, c.m, c.v.data(), kSketchRank, c.p.data());
  c.select();
  for (auto _ : state) {
    gather_rows(c.y.data(), c.m, c.rows.data(), c.k, c.packed.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.k * c.m * int64_t{sizeof(float)});
}

void BM_ScatterRows(benchmark::State& state) {
  ArcCase c(state);
  sketch(c.y.data(), c.n, c.m, c.v.data(), kSketchRank, c.p.data());
  c.select();
  for (auto _ : state) {
    scatter_rows(c.packed.data(), c.m, c.rows.data(), c.k, c.y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.k * c.m * int64_t{sizeof(float)});
}

// The whole compression of one tensor on one rank (the sketch All-Reduce excluded).
void BM_ArcCompress(benchmark::State& state) {
  ArcCase c(state);
  for (auto _ : state) {
    sketch(c.y.data(), c.n, c.m, c.v.data(), kSketchRank, c.p.data());
    c.select();
    gather_rows(c.y.data(), c.m, c.rows.data(), c.k, c.packed.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.bytes());
}

// Streams c's matrix in 64 KiB row blocks as the runtime's lazy inputs do: per block,
// produce(at, count) fills `block` with its `count` values starting at element `at`, and the
// block is sketched from cache.
template <class Produce>
void sketch_streamed(ArcCase& c, const std::vector<float>& vt, std::vector<float>& block,
                     Produce produce) {
  const int64_t block_rows = std::max<int64_t>(1, 16384 / c.m);
  block.resize(block_rows * c.m);
  for (int64_t row = 0; row < c.n; row += block_rows) {
    const int64_t rows = std::min(block_rows, c.n - row);
    produce(row * c.m, rows * c.m);
    sketch_transposed(block.data(), rows, c.m, vt.data(), kSketchRank,
                      c.p.data() + row * kSketchRank);
  }
}

// What one rank does for an EF21M tensor in the runtime: the momentum pass streams the
// difference block by block (64 KiB) into the sketch and restarts the output from hbar, then
// selection and the gather of the selected rows of v - h. Bytes: the gradient's.
void BM_Ef21mArcStreamed(benchmark::State& state) {
  ArcCase c(state);
  std::vector<float> v = gaussian(c.y.size(), 5), h = gaussian(c.y.size(), 6);
  const std::vector<float> hbar = gaussian(c.y.size(), 7);
  std::vector<float> vt(c.v.size()), block;
  for (auto _ : state) {
    transpose_projection(c.v.data(), c.m, kSketchRank, vt.data());
    sketch_streamed(c, vt, block, [&](int64_t at, int64_t count) {
      momentum_diff_restart(c.y.data() + at, v.data() + at, h.data() + at, hbar.data() + at, 0.1f,
                            block.data(), c.y.data() + at, count);
    });
    c.select();
    for (int64_t j = 0; j < c.k; ++j) {
      const int64_t at = c.rows[j] * c.m;
      subtract(v.data() + at, h.data() + at, c.packed.data() + j * c.m, c.m);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.bytes());
}

// The efm pair zeroes the gradient it reduces in place, as the runtime does. Fed zeros, u would
// decay geometrically into subnormal numbers after some hundred iterations, whose arithmetic is
// many times slower on some CPUs: each iteration starts from the same gradient again (untimed),
// as every training step brings a new one.
void restore_gradient(benchmark::State& state, const std::vector<float>& gradient,
                      std::vector<float>& y) {
  state.PauseTiming();
  std::memcpy(y.data(), gradient.data(), gradient.size() * sizeof(float));
  state.ResumeTiming();
}

// What one rank does for an efm tensor in the runtime (the gradient reduced in place), two ways.
// Passes: u = beta u + g, then e += u, the sketch of e, the output zeroed, the selected rows
// gathered from e (the runtime before the one-pass accumulation). Streamed: one pass forms u
// and e block by block (64 KiB), sketches the block from cache and zeroes the output's block.
// Bytes: the gradient's.
void BM_EfmArcPasses(benchmark::State& state) {
  ArcCase c(state);
  std::vector<float> u = gaussian(c.y.size(), 5), e = gaussian(c.y.size(), 6);
  std::vector<float> vt(c.v.size());
  const std::vector<float> gradient = c.y;
  for (auto _ : state) {
    restore_gradient(state, gradient, c.y);
    axpby(1.0f, c.y.data(), 0.9f, u.data(), c.y.size());
    axpby(1.0f, u.data(), 1.0f, e.data(), c.y.size());
    transpose_projection(c.v.data(), c.m, kSketchRank, vt.data());
    sketch_transposed(e.data(), c.n, c.m, vt.data(), kSketchRank, c.p.data());
    c.select();
    gather_rows(e.data(), c.m, c.rows.data(), c.k, c.packed.data());
    fill(c.y.data(), c.y.size(), 0.0f);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.bytes());
}

void BM_EfmArcStreamed(benchmark::State& state) {
  ArcCase c(state);
  std::vector<float> u = gaussian(c.y.size(), 5), e = gaussian(c.y.size(), 6);
  std::vector<float> vt(c.v.size()), block;
  const std::vector<float> gradient = c.y;
  for (auto _ : state) {
    restore_gradient(state, gradient, c.y);
    transpose_projection(c.v.data(), c.m, kSketchRank, vt.data());
    sketch_streamed(c, vt, block, [&](int64_t at, int64_t count) {
      accumulate_feedback(c.y.data() + at, u.data() + at, 0.9f, e.data() + at, block.data(), count);
      std::memset(c.y.data() + at, 0, count * sizeof(float));
    });
    c.select();
    gather_rows(e.data(), c.m, c.rows.data(), c.k, c.packed.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * c.bytes());
}

void BM_MomentumDiffRestart(benchmark::State& state) {
  const size_t n = state.range(0);
  auto g = gaussian(n, 4), v = gaussian(n, 5);
  const auto h = gaussian(n, 6), hbar = gaussian(n, 7);
  std::vector<float> diff(n);
  for (auto _ : state) {
    momentum_diff_restart(g.data(), v.data(), h.data(), hbar.data(), 0.1f, diff.data(), g.data(),
                          n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * int64_t{sizeof(float)});
}

void BM_FillGaussian(benchmark::State& state) {
  std::vector<float> out(state.range(0));
  for (auto _ : state) {
    fill_gaussian(42, out.data(), out.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * int64_t{sizeof(float)});
}

void BM_TopKAbs(benchmark::State& state) {
  const int64_t n = state.range(0), k = one_percent(n);
  const auto x = gaussian(n, 2);
  std::vector<int64_t> indices(k);
  for (auto _ : state) {
    top_k_abs(x.data(), n, k, indices.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * int64_t{sizeof(float)});
}

// k = 1% of n distinct indices; bytes are the k values added.
void BM_ScatterAdd(benchmark::State& state) {
  const int64_t n = state.range(0), k = one_percent(n);
  std::vector<int64_t> indices(k);
  sample_indices(3, n, k, indices.data());
  const auto values = gaussian(k, 3);
  std::vector<float> y(n, 0.0f);
  for (auto _ : state) {
    scatter_add(values.data(), indices.data(), k, 0.5f, y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * k * int64_t{sizeof(float)});
}

void BM_MemcpyElements(benchmark::State& state) {
  const auto x = gaussian(state.range(0), 4);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), x.size() * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * int64_t{sizeof(float)});
}

void BM_Axpby(benchmark::State& state) {
  const auto x = gaussian(state.range(0), 4);
  auto y = gaussian(state.range(0), 5);
  for (auto _ : state) {
    axpby(0.5f, x.data(), 0.5f, y.data(), y.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * int64_t{sizeof(float)});
}

void BM_Subtract(benchmark::State& state) {
  const auto x = gaussian(state.range(0), 4), y = gaussian(state.range(0), 5);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    subtract(x.data(), y.data(), out.data(), out.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * int64_t{sizeof(float)});
}

void BM_FromFloatFp16(benchmark::State& state) {
  const auto x = gaussian(state.range(0), 6);
  std::vector<uint16_t> h(x.size());
  for (auto _ : state) {
    from_float(x.data(), DType::kFloat16, h.data(), x.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * int64_t{sizeof(float)});
}

void BM_ToFloatFp16(benchmark::State& state) {
  const auto x = gaussian(state.range(0), 6);
  std::vector<uint16_t> h(x.size());
  from_float(x.data(), DType::kFloat16, h.data(), x.size());
  std::vector<float> out(x.size());
  for (auto _ : state) {
    to_float(h.data(), DType::kFloat16, out.data(), out.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * int64_t{sizeof(float)});
}

// Matrix shapes: a BERT-sized projection, its transpose, and a taller one.
void matrix_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "m"})->Args({1536, 384})->Args({384, 1536})->Args({8192, 384});
}
// Element counts: 1536 x 384 and 8192 x 384.
void element_counts(benchmark::internal::Benchmark* b) {
  b->ArgName("n")->Arg(589824)->Arg(3145728);
}

BENCHMARK(BM_Memcpy)->Apply(matrix_shapes);
BENCHMARK(BM_Sketch)->Apply(matrix_shapes);
BENCHMARK(BM_RowScoresTopKRows)->Apply(matrix_shapes);
BENCHMARK(BM_GatherRows)->Apply(matrix_shapes);
BENCHMARK(BM_ScatterRows)->Apply(matrix_shapes);
BENCHMARK(BM_ArcCompress)->Apply(matrix_shapes);
BENCHMARK(BM_Ef21mArcStreamed)->Apply(matrix_shapes);
BENCHMARK(BM_EfmArcPasses)->Apply(matrix_shapes);
BENCHMARK(BM_EfmArcStreamed)->Apply(matrix_shapes);
BENCHMARK(BM_FillGaussian)->ArgName("n")->Arg(384 * kSketchRank)->Arg(1536 * kSketchRank);
BENCHMARK(BM_MemcpyElements)->Apply(element_counts);
BENCHMARK(BM_TopKAbs)->Apply(element_counts);
BENCHMARK(BM_ScatterAdd)->Apply(element_counts);
BENCHMARK(BM_Axpby)->Apply(element_counts);
BENCHMARK(BM_Subtract)->Apply(element_counts);
BENCHMARK(BM_MomentumDiffRestart)->Apply(element_counts);
BENCHMARK(BM_FromFloatFp16)->Apply(element_counts);
BENCHMARK(BM_ToFloatFp16)->Apply(element_counts);

}  // namespace
}  // namespace kernels
}  // namespace arcreduce

BENCHMARK_MAIN();
