// The ARC-Top-K device plan on the GPU (CudaArcKernels) against the same plan with the CPU
// kernels, which arctopk_device_plan_test proves bit-identical to the ArcTopK compressor. One
// rank (the collectives are the identity). Selections must be identical; values may differ in
// the last bits (kernels_cuda.h: nvcc contracts to FMA). Skips without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "compressors/arctopk_device_plan.h"
#include "compressors/kernels/arc_plan_cuda.h"
#include "gpu_test_util.h"
#include "runtime/compressor_config.h"

namespace arcreduce {
namespace {

using arcreduce_gpu_test::DeviceArray;

TEST(GpuArcTopKPlan, MatchesTheCpuPlan) {
  ARC_SKIP_WITHOUT_GPU();
  Config config;
  config.sketch_rank = 4;
  config.min_compress_elements = 0;
  config.seed = 3;
  const CompressionSpec spec{"arctopk", 0.1, "none", ""};
  const std::vector<std::vector<int64_t>> shapes = {{256, 64}, {8, 4}, {5}, {0, 3}, {1, 1}};
  std::vector<std::vector<float>> in(shapes.size()), cpu_out(shapes.size()),
      cpu_contrib(shapes.size());
  std::vector<ArcTopKPlanTensor> cpu(shapes.size()), gpu(shapes.size());
  std::vector<std::unique_ptr<DeviceArray<float>>> d_in, d_out, d_contrib;
  for (size_t t = 0; t < shapes.size(); ++t) {
    size_t n = 1;
    for (int64_t s : shapes[t]) n *= static_cast<size_t>(s);
    in[t].resize(n);
    for (size_t i = 0; i < n; ++i) {
      in[t][i] =
          static_cast<float>(static_cast<int>((i * 2654435761u + t * 97u) % 20011u) - 10005) /
          1000.0f;
    }
    cpu_out[t].assign(n, 0.0f);
    cpu_contrib[t].assign(n, 0.0f);
    cpu[t] =
        ArcTopKPlanTensor{"t" + std::to_string(t), shapes[t], n, 1, in[t].data(), cpu_out[t].data(),
                          cpu_contrib[t].data()};
    d_in.push_back(std::make_unique<DeviceArray<float>>(n));
    d_out.push_back(std::make_unique<DeviceArray<float>>(n));
    d_contrib.push_back(std::make_unique<DeviceArray<float>>(n));
    if (n) {
      ASSERT_EQ(cudaMemcpy(d_in[t]->p, in[t].data(), n * sizeof(float), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    gpu[t] = cpu[t];
    gpu[t].input = d_in[t]->p;
    gpu[t].output = d_out[t]->p;
    gpu[t].contribution = d_contrib[t]->p;
  }
  const ArcTopKPlan plan = plan_arctopk(cpu, compressor_options(config), spec, 1);
  auto identity = [](float*, size_t) {};

  std::vector<float> first(plan.first_floats), second(plan.second_floats),
      scratch(plan.scratch_floats);
  std::vector<int64_t> rows(plan.row_count);
  CpuArcKernels ck;
  run_arctopk_plan(ck, plan, cpu, {first.data(), second.data(), rows.data(), scratch.data()},
                   identity);

  DeviceArray<float> d_first(plan.first_floats), d_second(plan.second_floats),
      d_scratch(plan.scratch_floats);
  DeviceArray<int64_t> d_rows(plan.row_count);
  CudaArcKernels gk;
  run_arctopk_plan(gk, plan, gpu, {d_first.p, d_second.p, d_rows.p, d_scratch.p}, identity);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<int64_t> gpu_rows(plan.row_count);
  if (plan.row_count) {
    ASSERT_EQ(cudaMemcpy(gpu_rows.data(), d_rows.p, plan.row_count * sizeof(int64_t),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  EXPECT_EQ(gpu_rows, rows);
  for (size_t t = 0; t < shapes.size(); ++t) {
    const size_t n = in[t].size();
    std::vector<float> out(n), contrib(n);
    if (n) {
      ASSERT_EQ(cudaMemcpy(out.data(), d_out[t]->p, n * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(
          cudaMemcpy(contrib.data(), d_contrib[t]->p, n * sizeof(float), cudaMemcpyDeviceToHost),
          cudaSuccess);
    }
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(out[i], cpu_out[t][i], 1e-6f * (1.0f + std::fabs(cpu_out[t][i])))
          << "tensor " << t << " element " << i;
      EXPECT_NEAR(contrib[i], cpu_contrib[t][i], 1e-6f * (1.0f + std::fabs(cpu_contrib[t][i])))
          << "tensor " << t << " element " << i;
    }
  }
}

}  // namespace
}  // namespace arcreduce
