// The CUDA device path end to end: runtimes over a loopback world (one thread per rank, all on
// device 0), tensors in device memory written by a delayed producer. Without a GPU every test
// but NoDevice* skips with the CUDA runtime's reason; NoDevice* runs only there.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
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
using arcreduce::Handle;
using arcreduce::ReduceOp;
using arcreduce::Runtime;
using arcreduce::Status;
using arcreduce::StatusCode;
using arcreduce::Tensor;
using arcreduce::testing::run_runtimes;
using arcreduce::testing::test_config;
using ::testing::HasSubstr;

constexpr int kDelayMicroseconds = 20000;  // the producer's spin before it writes

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override { ARC_SKIP_WITHOUT_GPU(); }
};

Status reduce(Runtime& rt, const std::string& name, const Tensor& t) {
  return rt.synchronize(rt.allreduce_async(name, t, AllreduceOptions{}));
}

size_t element_size(DType dtype) {
  return dtype == DType::kFloat64 ? 8 : dtype == DType::kFloat32 ? 4 : 2;
}

float to_float(const std::vector<uint8_t>& bytes, size_t i, DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return static_cast<float>(reinterpret_cast<const double*>(bytes.data())[i]);
    case DType::kFloat16:
      return arcreduce::fp16_to_float(reinterpret_cast<const uint16_t*>(bytes.data())[i]);
    case DType::kBFloat16:
      return arcreduce::bf16_to_float(reinterpret_cast<const uint16_t*>(bytes.data())[i]);
    default:
      return reinterpret_cast<const float*>(bytes.data())[i];
  }
}

// Each rank r produces base_r + i on its own producer stream after a delay, hands the runtime
// an event recorded after the write (or nothing: the default stream), and checks the average.
void reduce_delayed(DType dtype, size_t n, bool use_ready_event, int ranks,
                    const std::string& compressor) {
  Config config = test_config();
  config.compressor = compressor;
  run_runtimes(ranks, config, [&](Runtime& rt, int rank) {
    void* data = nullptr;
    ASSERT_EQ(cudaMalloc(&data, n * element_size(dtype)), cudaSuccess);
    cudaStream_t producer = nullptr;
    cudaEvent_t ready = nullptr;
    if (use_ready_event) {
      ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
      ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
    }
    ASSERT_EQ(cudaMemset(data, 0, n * element_size(dtype)), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the zeros land before the producer runs
    delayed_ramp(data, n, dtype, static_cast<float>(rank + 1), 0.25f, kDelayMicroseconds, producer);
    if (ready) {
      ASSERT_EQ(cudaEventRecord(ready, producer), cudaSuccess);
    }
    std::vector<uint8_t> seen_in_callback(n * element_size(dtype));
    AllreduceOptions options;
    options.op = ReduceOp::kAverage;
    // The callback reads through the legacy default stream, which does not wait for the
    // runtime's non-blocking stream: the result must be complete when the callback fires.
    options.callback = [&](const Status& s) {
      if (s.ok()) {
        cudaMemcpy(seen_in_callback.data(), data, seen_in_callback.size(), cudaMemcpyDeviceToHost);
      }
    };
    Tensor t{data, dtype, {static_cast<int64_t>(n)}, Device{Device::kCUDA, 0}, ready};
    const Status s = rt.synchronize(rt.allreduce_async("g", t, options));
    ASSERT_TRUE(s.ok()) << s.message();
    const float mean_base = (ranks + 1) / 2.0f;
    for (size_t i = 0; i < n; ++i) {
      const float expect = mean_base + 0.25f * static_cast<float>(i);
      // Roundings: the input, the 1/N scaling and the sums (bf16 keeps 8 bits, fp16 11).
      const float relative = dtype == DType::kBFloat16  ? 0.03f
                             : dtype == DType::kFloat16 ? 0.005f
                                                        : 1e-6f;
      const float tolerance = std::abs(expect) * relative + 1e-3f;
      ASSERT_NEAR(to_float(seen_in_callback, i, dtype), expect, tolerance)
          << "element " << i << " of " << n << " rank " << rank;
    }
    if (ready) cudaEventDestroy(ready);
    if (producer) cudaStreamDestroy(producer);
    cudaFree(data);
  });
}

TEST_F(GpuTest, DenseAverageWaitsForDelayedProducerEvent) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    reduce_delayed(dtype, 3000, true, 2, "none");
  }
}

TEST_F(GpuTest, DenseAverageWaitsForDefaultStreamWithoutEvent) {
  reduce_delayed(DType::kFloat32, 100000, false, 3, "none");
}

TEST_F(GpuTest, StagedChunksOfALargeBucket) {
  // 12 MiB of fp32: three staging chunks.
  reduce_delayed(DType::kFloat32, size_t{3} << 20, true, 2, "none");
}

TEST_F(GpuTest, CompressedBucketMatchesTheSameTensorsOnTheCpu) {
  // fp16 compression rounds, so compare against the CPU path on identical input.
  Config config = test_config();
  config.compressor = "fp16";
  const size_t n = 5000;
  run_runtimes(2, config, [&](Runtime& rt, int rank) {
    std::vector<float> host(n);
    for (size_t i = 0; i < n; ++i) host[i] = std::sin(0.01f * i + rank);
    void* data = nullptr;
    ASSERT_EQ(cudaMalloc(&data, n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(data, host.data(), n * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    Tensor dev{data, DType::kFloat32, {static_cast<int64_t>(n)}, Device{Device::kCUDA, 0}};
    Tensor cpu{host.data(), DType::kFloat32, {static_cast<int64_t>(n)}};
    ASSERT_TRUE(reduce(rt, "dev", dev).ok());
    ASSERT_TRUE(reduce(rt, "cpu", cpu).ok());
    std::vector<float> back(n);
    ASSERT_EQ(cudaMemcpy(back.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(back, host);
    cudaFree(data);
  });
}

TEST_F(GpuTest, ManyTensorsInOneBucketSpanSeveralCopyBatches) {
  run_runtimes(2, test_config(), [&](Runtime& rt, int rank) {
    const int tensors = 120;  // more than one launch's worth of segments
    std::vector<void*> data(tensors);
    std::vector<Handle> handles;
    for (int k = 0; k < tensors; ++k) {
      const size_t n = 1 + static_cast<size_t>(k * 53 % 700);
      ASSERT_EQ(cudaMalloc(&data[k], n * sizeof(float)), cudaSuccess);
      delayed_ramp(data[k], n, DType::kFloat32, static_cast<float>(k + rank), 1.0f, 0, nullptr);
      AllreduceOptions o;
      o.op = ReduceOp::kSum;
      handles.push_back(rt.allreduce_async(
          "t" + std::to_string(k),
          Tensor{data[k], DType::kFloat32, {static_cast<int64_t>(n)}, Device{Device::kCUDA, 0}},
          o));
    }
    for (int k = 0; k < tensors; ++k) {
      ASSERT_TRUE(rt.synchronize(handles[k]).ok());
      const size_t n = 1 + static_cast<size_t>(k * 53 % 700);
      std::vector<float> back(n);
      cudaMemcpy(back.data(), data[k], n * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 2.0f * (k + i) + 1.0f) << k << " " << i;
      cudaFree(data[k]);
    }
  });
}

TEST_F(GpuTest, BadDeviceIndexAndHostPointerAreRejected) {
  int count = 0;
  cudaGetDeviceCount(&count);
  run_runtimes(1, test_config(), [&](Runtime& rt, int) {
    float host[4] = {};
    void* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, sizeof(host)), cudaSuccess);
    Status s =
        reduce(rt, "bad_index", Tensor{dev, DType::kFloat32, {4}, Device{Device::kCUDA, count}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("'bad_index' on rank 0"));
    EXPECT_THAT(s.message(), HasSubstr("out of range"));
    s = reduce(rt, "host_ptr", Tensor{host, DType::kFloat32, {4}, Device{Device::kCUDA, 0}});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("host memory"));
    cudaFree(dev);
  });
}

// Runs only where the CUDA runtime has no usable device: a CUDA tensor must then fail with the
// runtime's reason, not crash or hang.
TEST(NoDevice, CudaTensorFailsWithTheRuntimeReason) {
  const std::string reason = arcreduce_gpu_test::no_device_reason();
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is present";
  run_runtimes(2, test_config(), [&](Runtime& rt, int rank) {
    float x[4] = {};
    int fired = 0;
    AllreduceOptions o;
    o.callback = [&](const Status&) { ++fired; };
    const Status s = rt.synchronize(
        rt.allreduce_async("w", Tensor{x, DType::kFloat32, {4}, Device{Device::kCUDA, 0}}, o));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("tensor 'w' on rank " + std::to_string(rank)));
    EXPECT_THAT(s.message(), HasSubstr("no CUDA device is usable"));
    EXPECT_EQ(fired, 1);
    // The runtime goes on: a CPU tensor still reduces.
    float y[2] = {1.0f, 2.0f};
    EXPECT_TRUE(reduce(rt, "cpu", Tensor{y, DType::kFloat32, {2}}).ok());
  });
}

}  // namespace
}  // namespace arcreduce_test
