// What the CPU and CUDA builds of the kernels compute bit-identically (kernels_cuda.h): the
// Gaussian projection (portable_math.h) and the row scores that select ARC's rows from the
// summed sketch. Skips without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "compressors/kernels/kernels_cuda.h"
#include "compressors/kernels/philox.h"
#include "compressors/kernels/portable_math.h"
#include "gpu_test_util.h"
#include "portable_math_kernels.h"

namespace arcreduce {
namespace {

using DeviceFloats = arcreduce_gpu_test::DeviceArray<float>;

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

TEST(GpuGaussian, FillGaussianIsBitIdenticalToTheCpuBuild) {
  ARC_SKIP_WITHOUT_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // Lengths that end inside a Philox block, and a long one (4M values) for coverage.
  const size_t sizes[] = {0, 1, 2, 3, 5, 4097, size_t{1} << 22};
  const uint64_t keys[] = {0, 1, kernels::philox_key(3, "w", 7), ~uint64_t{0}};
  for (uint64_t key : keys) {
    for (size_t n : sizes) {
      DeviceFloats d(n);
      kernels::cuda::fill_gaussian(key, d.p, n, stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const std::vector<float> gpu = d.to_host(n);
      std::vector<float> cpu(n);
      kernels::fill_gaussian(key, cpu.data(), n);
      size_t differ = 0, first = n;
      for (size_t i = 0; i < n; ++i) {
        if (bits_of(gpu[i]) != bits_of(cpu[i])) {
          if (first == n) first = i;
          ++differ;
        }
      }
      EXPECT_EQ(differ, 0u) << "key " << key << " n " << n << ": first at " << first
                            << (first < n ? " (gpu " + std::to_string(gpu[first]) + ", cpu " +
                                                std::to_string(cpu[first]) + ")"
                                          : std::string());
    }
  }
  cudaStreamDestroy(stream);
}

// Every input Box-Muller can receive, through the device and the host build of the functions.
TEST(GpuGaussian, PortableFunctionsAreBitIdenticalOnEveryInput) {
  ARC_SKIP_WITHOUT_GPU();
  constexpr uint32_t kCount = 1u << 24;
  DeviceFloats d_log(kCount), d_sin(kCount), d_cos(kCount);
  arcreduce_test::portable_math_on_device(d_log.p, d_sin.p, d_cos.p, kCount, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> log_gpu = d_log.to_host(kCount), sin_gpu = d_sin.to_host(kCount),
                           cos_gpu = d_cos.to_host(kCount);
  size_t log_differ = 0, sin_differ = 0, cos_differ = 0;
  for (uint32_t j = 0; j < kCount; ++j) {
    float s = 0.0f, c = 0.0f;
    kernels::portable_sincos_2pi(kernels::uniform_open1(j << 8), &s, &c);
    log_differ +=
        bits_of(log_gpu[j]) != bits_of(kernels::portable_log(kernels::uniform_open0(j << 8)));
    sin_differ += bits_of(sin_gpu[j]) != bits_of(s);
    cos_differ += bits_of(cos_gpu[j]) != bits_of(c);
  }
  EXPECT_EQ(log_differ, 0u);
  EXPECT_EQ(sin_differ, 0u);
  EXPECT_EQ(cos_differ, 0u);
}

// Scores of the same input, with lengths that leave a partial set of lanes, from values whose
// products and sums round (a contracted multiply-add would differ from them).
TEST(GpuScores, SketchRowScoresAndRowSqNormsAreBitIdenticalToTheCpuBuild) {
  ARC_SKIP_WITHOUT_GPU();
  constexpr int64_t kRows = 1000;
  for (int64_t cols : {int64_t{1}, int64_t{4}, int64_t{33}, int64_t{384}}) {
    const size_t n = static_cast<size_t>(kRows * cols);
    std::vector<float> x(n);
    kernels::fill_gaussian(kernels::philox_key(9, "scores", static_cast<uint64_t>(cols)), x.data(),
                           n);
    DeviceFloats d_x(n), d_scores(kRows);
    ASSERT_EQ(cudaMemcpy(d_x.p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    for (int kernel = 0; kernel < 2; ++kernel) {
      std::vector<float> cpu(kRows);
      if (kernel == 0) {
        const int r = static_cast<int>(cols);
        kernels::cuda::sketch_row_scores(d_x.p, kRows, r, d_scores.p, nullptr);
        kernels::sketch_row_scores(x.data(), kRows, r, cpu.data());
      } else {
        kernels::cuda::row_sq_norms(d_x.p, kRows, cols, d_scores.p, nullptr);
        kernels::row_sq_norms(x.data(), kRows, cols, cpu.data());
      }
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> gpu = d_scores.to_host(kRows);
      for (int64_t i = 0; i < kRows; ++i) {
        ASSERT_EQ(bits_of(gpu[i]), bits_of(cpu[i]))
            << (kernel == 0 ? "sketch_row_scores" : "row_sq_norms") << ", " << cols
            << " columns, row " << i << ": gpu " << gpu[i] << ", cpu " << cpu[i];
      }
    }
  }
}

}  // namespace
}  // namespace arcreduce
