// The CUDA build of the compression kernels (kernels_cuda.h) on a gradient set: ARC-Top-K's
// per-tensor sequence (projection: fill_gaussian_transposed + sketch_transposed;
// sketch_row_scores; top_k_rows; gather_rows; scatter_rows) on one stream owned by the program,
// against a device-to-device cudaMemcpyAsync of the same bytes measured in the same run (the
// bandwidth bound). Which tensors take the sketch path, their matrix view and k come from
// plan_arctopk() (ArcTopK's path decisions); the others are counted and not timed.
//
// Timing: cudaEvents around each phase of each tensor (the stream is synchronised between
// phases, so launch latency is included as the stream sees it; top_k_rows synchronises with the
// stream itself because it sizes its work from the data), and around the whole sequence over
// all sketched tensors back to back. Interleaved rounds, warm-up discarded, medians.
//
// Before timing, the first sketched tensor is checked against the CPU kernels: the transposed
// projection bit for bit against fill_gaussian + transpose_projection (one numerical
// definition, portable_math.h); the sketch
// within both builds' worst-case rounding bound relative to the sum of magnitudes (nvcc
// contracts to FMA); the scores of the device's sketch bit for bit; top_k_rows on them equal to
// the CPU's; gather and scatter exact. Exits 0 with a line when no CUDA device is usable.
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "arcreduce/config.h"
#include "bench/gradient_sets.h"
#include "bench/report.h"
#include "compressors/arctopk_device_plan.h"
#include "compressors/kernels/kernels.h"
#include "compressors/kernels/kernels_cuda.h"
#include "runtime/compressor_config.h"
#include "tensor_queue/message.h"

#define BENCH_CHECK(call)                                                         \
  do {                                                                            \
    const cudaError_t rc_ = (call);                                               \
    if (rc_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(rc_));                                      \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

namespace {

using arcreduce::ArcTopKPlan;
namespace kc = arcreduce::kernels::cuda;
namespace kh = arcreduce::kernels;

template <class T>
T* device_alloc(size_t n) {
  void* raw = nullptr;
  BENCH_CHECK(cudaMalloc(&raw, (n ? n : 1) * sizeof(T)));
  return static_cast<T*>(raw);
}

template <class T>
std::vector<T> to_host(const T* d, size_t n) {
  std::vector<T> out(n);
  if (n) BENCH_CHECK(cudaMemcpy(out.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

// Device buffers for one tensor's work, sized for the largest sketched tensor.
struct Scratch {
  float* vt = nullptr;      // r x m
  float* p = nullptr;       // n x r sketch
  float* scores = nullptr;  // n
  int64_t* rows = nullptr;  // k
  float* packed = nullptr;  // k x m
};

// Phases, in the order they run on a tensor.
enum Phase { kProjectSketch, kScores, kTopK, kGather, kScatter, kMemcpy, kPhases };
const char* const kPhaseNames[kPhases] = {"fill_gaussian_transposed + sketch_transposed",
                                          "sketch_row_scores",
                                          "top_k_rows",
                                          "gather_rows",
                                          "scatter_rows",
                                          "cudaMemcpyAsync of the tensor (bound)"};

struct Work {
  const ArcTopKPlan::Item* item;
  const float* y;  // the tensor's gradient, device
  float* out;      // where scatter_rows writes, device
  int r;
};

void run_phase(Phase phase, const Work& w, const Scratch& s, cudaStream_t stream) {
  const int64_t n = w.item->n, m = w.item->m, k = w.item->k;
  switch (phase) {
    case kProjectSketch:
      kc::fill_gaussian_transposed(w.item->key, m, w.r, s.vt, stream);
      kc::sketch_transposed(w.y, n, m, s.vt, w.r, s.p, stream);
      break;
    case kScores:
      kc::sketch_row_scores(s.p, n, w.r, s.scores, stream);
      break;
    case kTopK:
      kc::top_k_rows(s.scores, n, k, s.rows, stream);
      break;
    case kGather:
      kc::gather_rows(w.y, m, s.rows, k, s.packed, stream);
      break;
    case kScatter:
      kc::scatter_rows(s.packed, m, s.rows, k, w.out, stream);
      break;
    case kMemcpy:
      BENCH_CHECK(cudaMemcpyAsync(w.out, w.y, static_cast<size_t>(n * m) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream));
      break;
    default:
      break;
  }
}

// |got - want| <= tolerance * scale[i] for every i; prints the first failure.
bool close_enough(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<double>& scale, double tolerance) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tolerance * scale[i])) {
      std::fprintf(stderr, "%s: element %zu is %.9g on the device, %.9g on the CPU\n", what, i,
                   got[i], want[i]);
      return false;
    }
  }
  return true;
}

// The first sketched tensor through the device kernels against the CPU kernels.
bool verify(const Work& w, const std::vector<float>& y_host, const Scratch& s,
            cudaStream_t stream) {
  const int64_t n = w.item->n, m = w.item->m, k = w.item->k;
  const int r = w.r;
  for (int p = kProjectSketch; p <= kScatter; ++p) run_phase(static_cast<Phase>(p), w, s, stream);
  BENCH_CHECK(cudaStreamSynchronize(stream));
  const size_t mr = static_cast<size_t>(m) * r, nr = static_cast<size_t>(n) * r;
  const std::vector<float> vt = to_host(s.vt, mr), p = to_host(s.p, nr),
                           scores = to_host(s.scores, n);
  const std::vector<int64_t> rows = to_host(s.rows, k);
  const std::vector<float> packed = to_host(s.packed, static_cast<size_t>(k * m)),
                           out = to_host(w.out, static_cast<size_t>(n * m));

  std::vector<float> v_cpu(mr), vt_cpu(mr), p_cpu(nr), scores_cpu(n);
  kh::fill_gaussian(w.item->key, v_cpu.data(), mr);
  kh::transpose_projection(v_cpu.data(), m, r, vt_cpu.data());
  kh::sketch_transposed(y_host.data(), n, m, vt_cpu.data(), r, p_cpu.data());
  if (std::memcmp(vt.data(), vt_cpu.data(), mr * sizeof(float)) != 0) {
    std::fprintf(stderr, "projection: not bit-identical to the CPU build\n");
    return false;
  }
  // Scale of each sketch entry: sum over the row of |y| |v|.
  std::vector<double> p_scale(nr, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < r; ++c) {
      double sum = 0.0;
      for (int64_t j = 0; j < m; ++j) {
        sum += std::fabs(static_cast<double>(y_host[i * m + j]) * v_cpu[j * r + c]);
      }
      p_scale[i * r + c] = sum;
    }
  }
  // Each build's dot product is within (m / 32 + 6) * 2^-24 of the sum of magnitudes (32 lanes of
  // m / 32 terms, a 5-level tree, the products), so the two differ by at most twice that.
  const double tolerance = 2.0 * (static_cast<double>(m) / 32.0 + 6.0) * 5.9604644775390625e-8;
  if (!close_enough("sketch_transposed", p, p_cpu, p_scale, tolerance)) return false;
  kh::sketch_row_scores(p.data(), n, r, scores_cpu.data());  // on the device's sketch
  if (std::memcmp(scores.data(), scores_cpu.data(), n * sizeof(float)) != 0) {
    std::fprintf(stderr, "sketch_row_scores: not bit-identical to the CPU build's\n");
    return false;
  }
  std::vector<int64_t> rows_cpu(k);
  kh::top_k_rows(scores.data(), n, k, rows_cpu.data());  // on the device's scores
  if (rows != rows_cpu) {
    std::fprintf(stderr, "top_k_rows: the device selected other rows than the CPU\n");
    return false;
  }
  for (int64_t i = 0; i < k; ++i) {
    if (std::memcmp(&packed[i * m], &y_host[rows[i] * m], m * sizeof(float)) != 0 ||
        std::memcmp(&out[rows[i] * m], &packed[i * m], m * sizeof(float)) != 0) {
      std::fprintf(stderr, "gather_rows/scatter_rows: row %lld differs\n",
                   static_cast<long long>(rows[i]));
      return false;
    }
  }
  return true;
}

// top_k_rows' two selections at n rows (k = ratio * n, at least 1) on random positive scores:
// both must select the CPU's rows; prints a table row of medians. False on a mismatch.
bool compare_selections(int64_t n, double ratio, int repetitions, int warmup, cudaStream_t stream,
                        const std::function<double(std::function<void()>)>& timed) {
  const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(ratio * static_cast<double>(n)));
  std::vector<float> scores_host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    scores_host[i] = static_cast<float>((static_cast<uint64_t>(i) * 2654435761u) % 1000003u);
  }
  float* scores = device_alloc<float>(n);
  int64_t* rows = device_alloc<int64_t>(k);
  BENCH_CHECK(cudaMemcpy(scores, scores_host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<int64_t> expected(static_cast<size_t>(k));
  kh::top_k_rows(scores_host.data(), n, k, expected.data());
  using Select = void (*)(const float*, int64_t, int64_t, int64_t*, cudaStream_t);
  const Select selections[2] = {kc::detail::top_k_rows_by_sort, kc::detail::top_k_rows_sampled};
  double median[2] = {};
  for (int v = 0; v < 2; ++v) {
    BENCH_CHECK(cudaMemset(rows, 0xff, k * sizeof(int64_t)));
    selections[v](scores, n, k, rows, stream);
    BENCH_CHECK(cudaStreamSynchronize(stream));
    if (to_host(rows, static_cast<size_t>(k)) != expected) {
      std::fprintf(stderr, "top_k_rows (%s) at n = %lld: other rows than the CPU's\n",
                   v == 0 ? "sort" : "sampled", static_cast<long long>(n));
      return false;
    }
    std::vector<double> samples;
    for (int round = 0; round < warmup + repetitions; ++round) {
      const double sec = timed([&] { selections[v](scores, n, k, rows, stream); });
      if (round >= warmup) samples.push_back(sec);
    }
    median[v] = arcreduce::bench::summarize(samples).median;
  }
  std::printf("| %lld | %lld | %.1f | %.1f | %.2f |\n", static_cast<long long>(n),
              static_cast<long long>(k), median[0] * 1e6, median[1] * 1e6, median[0] / median[1]);
  cudaFree(scores);
  cudaFree(rows);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace arcreduce;
  CLI::App app{"CUDA compression kernels (ARC-Top-K sequence) against cudaMemcpy"};
  std::string set_name = "tiny-transformer-24M";
  double ratio = 0.01;
  int rank = Config{}.sketch_rank, repetitions = 20, warmup = 3;
  bool per_tensor = true;
  app.add_option("--set", set_name, "gradient set");
  app.add_option("--ratio", ratio, "ARC-Top-K ratio (rows kept)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--rank", rank, "sketch rank r")->check(CLI::PositiveNumber);
  app.add_option("--repetitions", repetitions, "timed rounds")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "discarded rounds")->check(CLI::NonNegativeNumber);
  app.add_flag("!--no-per-tensor", per_tensor, "print only the sums over the set");
  std::vector<int64_t> select_rows;
  app.add_option("--select-rows", select_rows,
                 "also time top_k_rows' sort and sampled selections at these row counts")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  bench::GradientSet set;
  try {
    set = bench::gradient_set(set_name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "--set: %s\n", e.what());
    return 2;
  }
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): nothing measured\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
    return 0;
  }

  // ArcTopK's path decisions for this set (one rank; only shapes matter).
  Config config;
  config.sketch_rank = rank;
  const CompressionSpec spec{"arctopk", ratio, "none", ""};
  std::vector<ArcTopKPlanTensor> plan_tensors;
  size_t total = 0;
  for (const bench::TensorSpec& t : set.tensors) {
    const size_t n = static_cast<size_t>(t.elements());
    plan_tensors.push_back(ArcTopKPlanTensor{t.name, t.shape, n, 0, nullptr, nullptr, nullptr});
    total += n;
  }
  const ArcTopKPlan plan = plan_arctopk(plan_tensors, compressor_options(config), spec, 1);
  const size_t bytes = total * sizeof(float);

  // The set's gradients back to back in one allocation, a second one for the copies and
  // scatters, and scratch for the largest sketched tensor.
  std::vector<float> y_host(total);
  for (size_t i = 0; i < total; ++i) {
    y_host[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 20011u) - 10005) * 1e-4f;
  }
  float* y = device_alloc<float>(total);
  float* out = device_alloc<float>(total);
  BENCH_CHECK(cudaMemcpy(y, y_host.data(), bytes, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemset(out, 0, bytes));
  std::vector<Work> work;
  std::vector<size_t> work_tensor, work_offset;
  size_t max_m = 0, max_n = 0, max_k = 0, max_km = 0, sketched_bytes = 0, offset = 0;
  for (size_t t = 0; t < plan.items.size(); ++t) {
    const ArcTopKPlan::Item& it = plan.items[t];
    if (it.path == ArcTopKPlan::Path::kSketch) {
      work.push_back(Work{&it, y + offset, out + offset, plan.r});
      work_tensor.push_back(t);
      work_offset.push_back(offset);
      max_m = std::max(max_m, static_cast<size_t>(it.m));
      max_n = std::max(max_n, static_cast<size_t>(it.n));
      max_k = std::max(max_k, static_cast<size_t>(it.k));
      max_km = std::max(max_km, static_cast<size_t>(it.k * it.m));
      sketched_bytes += plan_tensors[t].elements * sizeof(float);
    }
    offset += plan_tensors[t].elements;
  }
  if (work.empty()) {
    std::printf("set %s: no tensor takes the sketch path at ratio %g, rank %d: nothing measured\n",
                set.name.c_str(), ratio, plan.r);
    return 0;
  }
  Scratch s;
  s.vt = device_alloc<float>(max_m * plan.r);
  s.p = device_alloc<float>(max_n * plan.r);
  s.scores = device_alloc<float>(max_n);
  s.rows = device_alloc<int64_t>(max_k);
  s.packed = device_alloc<float>(max_km);

  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  auto timed = [&](auto&& enqueue) {
    BENCH_CHECK(cudaEventRecord(start, stream));
    enqueue();
    BENCH_CHECK(cudaEventRecord(stop, stream));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / 1000.0;
  };

  {
    const std::vector<float> first(
        y_host.begin() + static_cast<std::ptrdiff_t>(work_offset[0]),
        y_host.begin() +
            static_cast<std::ptrdiff_t>(work_offset[0] + work[0].item->n * work[0].item->m));
    if (!verify(work[0], first, s, stream)) return 1;
  }

  // samples[w][phase]; whole-set samples: the set's memcpy and the sequence over all tensors.
  std::vector<std::vector<std::vector<double>>> samples(work.size(),
                                                        std::vector<std::vector<double>>(kPhases));
  std::vector<double> set_memcpy, set_sequence;
  for (int round = 0; round < warmup + repetitions; ++round) {
    const bool keep = round >= warmup;
    const double copy = timed(
        [&] { BENCH_CHECK(cudaMemcpyAsync(out, y, bytes, cudaMemcpyDeviceToDevice, stream)); });
    const double sequence = timed([&] {
      for (const Work& w : work) {
        for (int p = kProjectSketch; p <= kScatter; ++p) {
          run_phase(static_cast<Phase>(p), w, s, stream);
        }
      }
    });
    if (keep) set_memcpy.push_back(copy), set_sequence.push_back(sequence);
    for (size_t i = 0; i < work.size(); ++i) {
      for (int p = 0; p < kPhases; ++p) {
        const double sec = timed([&] { run_phase(static_cast<Phase>(p), work[i], s, stream); });
        if (keep) samples[i][p].push_back(sec);
      }
    }
  }

  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("date: %s\nmachine: %s\ndevice: %s\n", bench::utc_now().c_str(),
              bench::machine_description().c_str(), prop.name);
  std::printf(
      "set: %s, %zu fp32 tensors, %.1f MB; ARC-Top-K ratio %g, r = %d: %zu tensors sketched "
      "(%.1f MB), %zu not (exact or dense path, not timed); %d rounds after %d; checked against "
      "the CPU kernels on %s\n",
      set.name.c_str(), set.tensors.size(), bytes / 1e6, ratio, plan.r, work.size(),
      sketched_bytes / 1e6, set.tensors.size() - work.size(), repetitions, warmup,
      set.tensors[work_tensor[0]].name.c_str());

  std::vector<double> phase_sum(kPhases, 0.0);
  if (per_tensor) {
    std::printf("\nper tensor, median us (ratio = ARC phases / memcpy of the tensor):\n");
    std::printf(
        "| tensor | n x m | k | project+sketch | scores | top_k_rows | gather | scatter "
        "| memcpy | ratio |\n|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (size_t i = 0; i < work.size(); ++i) {
    double med[kPhases];
    double arc = 0.0;
    for (int p = 0; p < kPhases; ++p) {
      med[p] = bench::summarize(samples[i][p]).median;
      phase_sum[p] += med[p];
      if (p != kMemcpy) arc += med[p];
    }
    if (per_tensor) {
      const ArcTopKPlan::Item& it = *work[i].item;
      std::printf("| %s | %lld x %lld | %lld | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n",
                  set.tensors[work_tensor[i]].name.c_str(), static_cast<long long>(it.n),
                  static_cast<long long>(it.m), static_cast<long long>(it.k),
                  med[kProjectSketch] * 1e6, med[kScores] * 1e6, med[kTopK] * 1e6,
                  med[kGather] * 1e6, med[kScatter] * 1e6, med[kMemcpy] * 1e6, arc / med[kMemcpy]);
    }
  }

  const bench::Summary copy = bench::summarize(set_memcpy);
  const bench::Summary sequence = bench::summarize(set_sequence);
  std::printf(
      "\nover the set (sums of per-tensor medians; the bound is one cudaMemcpyAsync of the "
      "whole set, %.1f MB, median %.1f us, %.1f GB/s read + write):\n",
      bytes / 1e6, copy.median * 1e6, 2.0 * bytes / copy.median / 1e9);
  std::printf("| phase | us | vs memcpy of the set |\n|---|---|---|\n");
  double arc_sum = 0.0;
  for (int p = 0; p < kPhases; ++p) {
    if (p != kMemcpy) arc_sum += phase_sum[p];
    std::printf("| %s | %.1f | %.2f |\n", kPhaseNames[p], phase_sum[p] * 1e6,
                phase_sum[p] / copy.median);
  }
  std::printf("| ARC phases, summed | %.1f | %.2f |\n", arc_sum * 1e6, arc_sum / copy.median);
  std::printf("| ARC sequence over the set, back to back (median; p90 %.1f us) | %.1f | %.2f |\n",
              sequence.p90 * 1e6, sequence.median * 1e6, sequence.median / copy.median);

  if (!select_rows.empty()) {
    std::printf(
        "\ntop_k_rows' selections (k = ratio x n; median us over %d rounds; the CUDA build sorts "
        "up to 2^20 rows):\n| n | k | sort | sampled | sort / sampled |\n|---|---|---|---|---|\n",
        repetitions);
    for (const int64_t n : select_rows) {
      if (!compare_selections(n, ratio, repetitions, warmup, stream, timed)) return 1;
    }
  }

  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  for (void* p : {static_cast<void*>(y), static_cast<void*>(out), static_cast<void*>(s.vt),
                  static_cast<void*>(s.p), static_cast<void*>(s.scores), static_cast<void*>(s.rows),
                  static_cast<void*>(s.packed)}) {
    cudaFree(p);
  }
  return 0;
}
