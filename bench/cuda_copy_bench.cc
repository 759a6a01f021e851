// The device path's batched pack and scaled unpack (ops/cuda/copy_batch_cuda.h) on a gradient
// set, against one device-to-device cudaMemcpyAsync of the same bytes (the bandwidth bound,
// measured in the same run) and one cudaMemcpyAsync per tensor (what a per-tensor pack costs).
// Interleaved rounds, warm-up discarded, cudaEvent timing; exits 0 with a line when no CUDA
// device is usable. Verifies the packed and unpacked bytes once.
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "bench/gradient_sets.h"
#include "bench/report.h"
#include "ops/copy_batch.h"
#include "ops/cuda/copy_batch_cuda.h"

#define BENCH_CHECK(call)                                                         \
  do {                                                                            \
    const cudaError_t rc_ = (call);                                               \
    if (rc_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(rc_));                                      \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

int main(int argc, char** argv) {
  using namespace arcreduce;
  CLI::App app{"CUDA batched pack/unpack against cudaMemcpy"};
  std::string set_name = "tiny-transformer-24M";
  int repetitions = 20, warmup = 3;
  app.add_option("--set", set_name, "gradient set");
  app.add_option("--repetitions", repetitions, "timed rounds")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "discarded rounds")->check(CLI::NonNegativeNumber);
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
  std::vector<size_t> sizes;
  size_t total = 0;
  for (const bench::TensorSpec& t : set.tensors) {
    sizes.push_back(static_cast<size_t>(t.elements()));
    total += sizes.back();
  }
  const size_t bytes = total * sizeof(float);
  void *tensors_memory = nullptr, *fused_memory = nullptr;
  BENCH_CHECK(cudaMalloc(&tensors_memory, bytes));
  BENCH_CHECK(cudaMalloc(&fused_memory, bytes));
  auto* tensors = static_cast<float*>(tensors_memory);
  auto* fused = static_cast<float*>(fused_memory);
  std::vector<float> host(total);
  for (size_t i = 0; i < total; ++i) host[i] = static_cast<float>(i % 1000) * 0.5f;
  BENCH_CHECK(cudaMemcpy(tensors, host.data(), bytes, cudaMemcpyHostToDevice));
  // Tensors lie back to back in one allocation, as the batch only sees pointers.
  std::vector<CopySpan> pack, unpack;
  size_t offset = 0;
  for (size_t n : sizes) {
    pack.push_back({tensors + offset, fused + offset, static_cast<int64_t>(n)});
    unpack.push_back({fused + offset, tensors + offset, static_cast<int64_t>(n)});
    offset += n;
  }
  const std::vector<CopyBatch> pack_batches = plan_copy_batches(pack, cuda::kCopyBlockElements);
  const std::vector<CopyBatch> unpack_batches = plan_copy_batches(unpack, cuda::kCopyBlockElements);
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));

  // Verify once: pack, then unpack with 1/4.
  for (const CopyBatch& b : pack_batches) {
    cuda::launch_copy_batch(b, ScalarType::kFloat32, false, 1.0, stream);
  }
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> check(total);
  BENCH_CHECK(cudaMemcpy(check.data(), fused, bytes, cudaMemcpyDeviceToHost));
  if (std::memcmp(check.data(), host.data(), bytes) != 0) {
    std::fprintf(stderr, "batched pack: wrong bytes\n");
    return 1;
  }
  for (const CopyBatch& b : unpack_batches) {
    cuda::launch_copy_batch(b, ScalarType::kFloat32, true, 0.25, stream);
  }
  BENCH_CHECK(cudaStreamSynchronize(stream));
  BENCH_CHECK(cudaMemcpy(check.data(), tensors, bytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < total; ++i) {
    if (check[i] != host[i] * 0.25f) {
      std::fprintf(stderr, "batched unpack: element %zu is %g, expected %g\n", i, check[i],
                   host[i] * 0.25f);
      return 1;
    }
  }

  // Variants: 0 one memcpy, 1 memcpy per tensor, 2 batched pack, 3 batched unpack with 1/N
  // (the tensors' values shrink each round; timing does not depend on them).
  const char* names[] = {"one cudaMemcpyAsync (bound)", "cudaMemcpyAsync per tensor",
                         "batched pack", "batched unpack x 1/4"};
  std::vector<std::vector<double>> samples(4);
  for (int round = 0; round < warmup + repetitions; ++round) {
    for (int v = 0; v < 4; ++v) {
      BENCH_CHECK(cudaEventRecord(start, stream));
      if (v == 0) {
        BENCH_CHECK(cudaMemcpyAsync(fused, tensors, bytes, cudaMemcpyDeviceToDevice, stream));
      } else if (v == 1) {
        for (const CopySpan& s : pack) {
          BENCH_CHECK(cudaMemcpyAsync(s.dst, s.src, s.elements * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream));
        }
      } else {
        for (const CopyBatch& b : v == 2 ? pack_batches : unpack_batches) {
          cuda::launch_copy_batch(b, ScalarType::kFloat32, v == 3, 0.25, stream);
        }
      }
      BENCH_CHECK(cudaEventRecord(stop, stream));
      BENCH_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (round >= warmup) samples[v].push_back(ms / 1000.0);
    }
  }

  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("date: %s\nmachine: %s\ndevice: %s\n", bench::utc_now().c_str(),
              bench::machine_description().c_str(), prop.name);
  std::printf("set: %s, %zu fp32 tensors, %.1f MB; %zu + %zu launches; %d rounds after %d\n",
              set.name.c_str(), sizes.size(), bytes / 1e6, pack_batches.size(),
              unpack_batches.size(), repetitions, warmup);
  std::printf("| variant | median us | p90 us | GB/s (read + write) | vs one memcpy |\n");
  std::printf("|---|---|---|---|---|\n");
  const double bound = bench::summarize(samples[0]).median;
  for (int v = 0; v < 4; ++v) {
    const bench::Summary s = bench::summarize(samples[v]);
    std::printf("| %s | %.1f | %.1f | %.1f | %.2f |\n", names[v], s.median * 1e6, s.p90 * 1e6,
                2.0 * bytes / s.median / 1e9, s.median / bound);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  cudaFree(tensors);
  cudaFree(fused);
  return 0;
}
