// ARC-Top-K compressed on the device, end to end through the runtime (loopback world, all ranks
// on device 0): the same gradients reduced as CPU tensors and as CUDA tensors give the same
// selected rows and values within float rounding, for every error-feedback kind (efm with its
// warm-up), fp32 and fp16, over several steps; the producer writes after a delay on its own
// stream; error-feedback state survives save_state/load_state on the device. Without a GPU every
// test skips.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "ops/half.h"
#include "producer_kernels.h"
#include "tests/runtime/loopback_harness.h"

namespace arcreduce_test {
namespace {

using arcreduce::AllreduceOptions;
using arcreduce::Config;
using arcreduce::Device;
using arcreduce::DType;
using arcreduce::Runtime;
using arcreduce::Status;
using arcreduce::Tensor;
using arcreduce::testing::run_runtimes;
using arcreduce::testing::test_config;

constexpr int64_t kRows = 256, kCols = 64;
constexpr size_t kElements = static_cast<size_t>(kRows * kCols);
constexpr int kRanks = 2;

class GpuArcTopK : public ::testing::Test {
 protected:
  void SetUp() override { ARC_SKIP_WITHOUT_GPU(); }
};

// Row norms far apart (row j scaled by 1 + j / 8, shuffled by a fixed permutation), so that the
// selection does not hinge on the last bits the two kernel builds may round differently.
float gradient(int rank, int step, size_t i) {
  const size_t row = i / kCols;
  const size_t scrambled = (row * 97) % kRows;
  const float scale = 1.0f + static_cast<float>(scrambled) / 8.0f;
  const float wave = std::sin(0.37f * static_cast<float>(i % kCols) + 0.5f * rank + 0.3f * step);
  return scale * (0.75f + 0.25f * wave);
}

Config arctopk_config(const std::string& ef) {
  Config c = test_config();
  c.compressor = "arctopk";
  c.compress_ratio = 0.05;
  c.error_feedback = ef;
  c.min_compress_elements = 0;
  c.seed = 3;
  return c;
}

// Values as fp32 from a buffer of `dtype` (fp32 or fp16).
std::vector<float> widen(const std::vector<uint16_t>& half, const std::vector<float>& full,
                         DType dtype) {
  if (dtype == DType::kFloat32) return full;
  std::vector<float> out(half.size());
  for (size_t i = 0; i < half.size(); ++i) out[i] = arcreduce::fp16_to_float(half[i]);
  return out;
}

// Runs `steps` reductions of one weight on every rank, as a CPU or a CUDA tensor; returns each
// rank's result of every step.
std::vector<std::vector<std::vector<float>>> run_steps(const Config& config, DType dtype,
                                                       bool on_device, int steps) {
  std::vector<std::vector<std::vector<float>>> results(kRanks);
  const size_t element = dtype == DType::kFloat32 ? 4 : 2;
  run_runtimes(kRanks, config, [&](Runtime& rt, int rank) {
    void* device = nullptr;
    cudaStream_t producer = nullptr;
    cudaEvent_t ready = nullptr;
    if (on_device) {
      ASSERT_EQ(cudaMalloc(&device, kElements * element), cudaSuccess);
      ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
      ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
    }
    for (int step = 0; step < steps; ++step) {
      std::vector<float> full(kElements);
      std::vector<uint16_t> half(dtype == DType::kFloat16 ? kElements : 0);
      for (size_t i = 0; i < kElements; ++i) full[i] = gradient(rank, step, i);
      for (size_t i = 0; i < half.size(); ++i) half[i] = arcreduce::float_to_fp16(full[i]);
      void* host = dtype == DType::kFloat32 ? static_cast<void*>(full.data()) : half.data();
      Tensor t{host, dtype, {kRows, kCols}};
      if (on_device) {
        // The producer stream spins before it writes: the runtime must wait for `ready`.
        spin_then_copy(device, host, kElements * element, 20000, producer);
        ASSERT_EQ(cudaEventRecord(ready, producer), cudaSuccess);
        t = Tensor{device, dtype, {kRows, kCols}, Device{Device::kCUDA, 0}, ready};
      }
      const Status s = rt.synchronize(rt.allreduce_async("layer.weight", t, AllreduceOptions{}));
      ASSERT_TRUE(s.ok()) << s.message();
      if (on_device) {
        ASSERT_EQ(cudaMemcpy(host, device, kElements * element, cudaMemcpyDeviceToHost),
                  cudaSuccess);
      }
      results[rank].push_back(widen(half, full, dtype));
    }
    if (ready) cudaEventDestroy(ready);
    if (producer) cudaStreamDestroy(producer);
    if (device) cudaFree(device);
  });
  return results;
}

std::vector<int64_t> nonzero_rows(const std::vector<float>& x) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) {
      if (x[r * kCols + c] != 0.0f) {
        rows.push_back(r);
        break;
      }
    }
  }
  return rows;
}

void expect_close(const std::vector<std::vector<std::vector<float>>>& cpu,
                  const std::vector<std::vector<std::vector<float>>>& gpu, float relative,
                  bool sparse, const std::string& what) {
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(cpu[rank].size(), gpu[rank].size()) << what;
    for (size_t step = 0; step < cpu[rank].size(); ++step) {
      const auto& a = cpu[rank][step];
      const auto& b = gpu[rank][step];
      if (sparse) {
        EXPECT_EQ(nonzero_rows(a), nonzero_rows(b)) << what << " step " << step;
      }
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], b[i], std::abs(a[i]) * relative + 1e-6f)
            << what << " rank " << rank << " step " << step << " element " << i;
      }
    }
  }
}

TEST_F(GpuArcTopK, DeviceBucketsMatchTheCpuPathForEveryErrorFeedback) {
  for (const char* ef : {"none", "ef14", "ef21", "ef21m", "efm"}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      const Config config = arctopk_config(ef);
      const auto cpu = run_steps(config, dtype, false, 3);
      const auto gpu = run_steps(config, dtype, true, 3);
      const std::string what = std::string(ef) + (dtype == DType::kFloat16 ? " fp16" : " fp32");
      // ef21 outputs hbar, which is dense after the warm start; the others are row-sparse.
      const bool sparse =
          std::string(ef) == "none" || std::string(ef) == "ef14" || std::string(ef) == "efm";
      expect_close(cpu, gpu, dtype == DType::kFloat16 ? 2e-3f : 1e-5f, sparse, what);
    }
  }
}

TEST_F(GpuArcTopK, WarmupStepsAreDenseOnTheDevice) {
  Config config = arctopk_config("ef14");
  config.warmup_steps = 1;
  const auto gpu = run_steps(config, DType::kFloat32, true, 2);
  for (size_t i = 0; i < kElements; ++i) {
    const float mean = (gradient(0, 0, i) + gradient(1, 0, i)) / 2.0f;
    ASSERT_NEAR(gpu[0][0][i], mean, 1e-6f * std::abs(mean)) << "element " << i;
  }
  // k = floor(ratio * rows) (matrix_view.h: kept()).
  EXPECT_EQ(nonzero_rows(gpu[0][1]).size(), static_cast<size_t>(std::floor(0.05 * kRows)));
}

// efm runs its warm-up itself: the first step sends the whole x = u + e densely, the later ones
// continue from the velocity it built, as on the CPU.
TEST_F(GpuArcTopK, EfmWarmupKeepsTheMomentumOnTheDevice) {
  Config config = arctopk_config("efm");
  config.warmup_steps = 1;
  const auto cpu = run_steps(config, DType::kFloat32, false, 3);
  const auto gpu = run_steps(config, DType::kFloat32, true, 3);
  for (size_t i = 0; i < kElements; ++i) {
    const float mean = (gradient(0, 0, i) + gradient(1, 0, i)) / 2.0f;
    ASSERT_NEAR(gpu[0][0][i], mean, 1e-6f * std::abs(mean)) << "element " << i;
  }
  expect_close(cpu, gpu, 1e-5f, false, "efm with one warm-up step");
}

TEST_F(GpuArcTopK, ErrorFeedbackSurvivesSaveAndLoadOnTheDevice) {
  const Config config = arctopk_config("ef14");
  const std::string dir = ::testing::TempDir();
  auto path = [&](int rank) { return dir + "/gpu_arctopk_state." + std::to_string(rank); };
  // Steps 0-1, save, step 2 (kept); load, step 2 again: the same result bit for bit. A new
  // runtime that loads the file and runs step 2 must agree too (device buffers from the file).
  std::vector<std::vector<float>> after_save(kRanks), after_load(kRanks), fresh(kRanks);
  auto step = [&](Runtime& rt, int rank, int s, void* device, std::vector<float>& out) {
    std::vector<float> g(kElements);
    for (size_t i = 0; i < kElements; ++i) g[i] = gradient(rank, s, i);
    ASSERT_EQ(cudaMemcpy(device, g.data(), kElements * 4, cudaMemcpyHostToDevice), cudaSuccess);
    Tensor t{device, DType::kFloat32, {kRows, kCols}, Device{Device::kCUDA, 0}};
    const Status st = rt.synchronize(rt.allreduce_async("layer.weight", t, AllreduceOptions{}));
    ASSERT_TRUE(st.ok()) << st.message();
    out.resize(kElements);
    ASSERT_EQ(cudaMemcpy(out.data(), device, kElements * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  };
  run_runtimes(kRanks, config, [&](Runtime& rt, int rank) {
    void* device = nullptr;
    ASSERT_EQ(cudaMalloc(&device, kElements * 4), cudaSuccess);
    std::vector<float> ignored;
    step(rt, rank, 0, device, ignored);
    step(rt, rank, 1, device, ignored);
    rt.save_state(path(rank));
    step(rt, rank, 2, device, after_save[rank]);
    rt.load_state(path(rank));
    step(rt, rank, 2, device, after_load[rank]);
    cudaFree(device);
  });
  run_runtimes(kRanks, config, [&](Runtime& rt, int rank) {
    void* device = nullptr;
    ASSERT_EQ(cudaMalloc(&device, kElements * 4), cudaSuccess);
    rt.load_state(path(rank));
    step(rt, rank, 2, device, fresh[rank]);
    cudaFree(device);
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(after_save[rank], after_load[rank]) << "rank " << rank;
    EXPECT_EQ(after_save[rank], fresh[rank]) << "rank " << rank;
    std::remove(path(rank).c_str());
  }
}

}  // namespace
}  // namespace arcreduce_test
