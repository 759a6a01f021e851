// NcclCommunicator (ops/cuda/nccl_communicator.h). The error paths run on every CUDA build (with
// NCCL: the message format, no device; without NCCL: create() says so). The reductions need a
// device (one rank per device: a one-rank world on one device, a two-rank world on two) and skip
// with the CUDA runtime's reason otherwise.
#include "ops/cuda/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "arcreduce/build_config.h"
#include "arcreduce/status.h"
#include "ops/cuda/cuda_handles.h"
#include "ops/half.h"
#include "ops/loopback_communicator.h"

namespace arcreduce_test {
namespace {

using arcreduce::Error;
using arcreduce::LoopbackWorld;
using arcreduce::ScalarType;
using arcreduce::StatusCode;
using arcreduce::cuda::NcclCommunicator;
using ::testing::HasSubstr;

int device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

TEST(NcclCommunicator, CompiledMatchesTheBuild) {
  EXPECT_EQ(arcreduce::cuda::nccl_compiled(), ARCREDUCE_NCCL != 0);
}

TEST(NcclCommunicator, WithoutNcclCreateSaysSo) {
  if (arcreduce::cuda::nccl_compiled()) GTEST_SKIP() << "this build has NCCL";
  LoopbackWorld world(1);
  auto comm = world.communicator(0);
  try {
    NcclCommunicator::create(*comm, 0);
    FAIL() << "create() returned in a build without NCCL";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("NCCL communicator on CUDA device 0"));
    EXPECT_THAT(e.what(), HasSubstr("this build of arcreduce has no NCCL"));
    EXPECT_THAT(e.what(), HasSubstr("ARCREDUCE_NCCL=OFF"));
  }
}

TEST(NcclCheck, MessageCarriesCallFileLineAndNcclString) {
  if (!arcreduce::cuda::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  try {
    // 1 is ncclUnhandledCudaError.
    arcreduce::cuda::throw_nccl_error(1, "ncclAllReduce(buf, buf, n)", "x.cc", 7);
    FAIL() << "throw_nccl_error returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kInternal);
    EXPECT_THAT(e.what(), HasSubstr("ncclAllReduce(buf, buf, n) failed at x.cc:7: "));
    EXPECT_THAT(e.what(), HasSubstr("unhandled cuda error"));
  }
}

TEST(NcclCommunicator, WithoutDeviceCreateFailsWithTheRuntimeReason) {
  if (!arcreduce::cuda::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  if (device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  LoopbackWorld world(1);
  auto comm = world.communicator(0);
  try {
    NcclCommunicator::create(*comm, 0);
    FAIL() << "create() without a device returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), StatusCode::kInternal);
    EXPECT_THAT(e.what(), HasSubstr("NCCL communicator on CUDA device 0 (rank 0 of 1)"));
    EXPECT_THAT(e.what(), HasSubstr("cudaError"));
  }
}

class GpuNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!arcreduce::cuda::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
    if (device_count() < 1) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  }
};

// Enqueues the All-Reduce of `host` (copied to the device) on a runtime-like non-blocking
// stream, waits for the stream only, checks NCCL's asynchronous state and returns the result.
template <typename T>
std::vector<T> reduce_on_device(NcclCommunicator& nccl, const std::vector<T>& host,
                                ScalarType type) {
  arcreduce::cuda::DeviceGuard guard(nccl.device());
  arcreduce::cuda::Stream stream(nccl.device());
  arcreduce::cuda::DeviceMemory memory;
  const size_t bytes = host.size() * sizeof(T);
  void* data = memory.reserve(bytes);
  EXPECT_EQ(cudaMemcpyAsync(data, host.data(), bytes, cudaMemcpyHostToDevice, stream.get()),
            cudaSuccess);
  nccl.allreduce(data, host.size(), type, stream.get());
  std::vector<T> out(host.size());
  EXPECT_EQ(cudaMemcpyAsync(out.data(), data, bytes, cudaMemcpyDeviceToHost, stream.get()),
            cudaSuccess);
  stream.synchronize();
  nccl.check_async();
  return out;
}

TEST_F(GpuNccl, OneRankSumIsTheInputForFp32AndFp16) {
  LoopbackWorld world(1);
  auto comm = world.communicator(0);
  int before = -1;
  ASSERT_EQ(cudaGetDevice(&before), cudaSuccess);
  std::unique_ptr<NcclCommunicator> nccl = NcclCommunicator::create(*comm, 0);
  int after = -1;
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(after, before);
  EXPECT_EQ(nccl->device(), 0);
  EXPECT_EQ(nccl->rank(), 0);
  EXPECT_EQ(nccl->size(), 1);

  std::vector<float> f32(100003);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.25f * static_cast<float>(i) - 7.0f;
  EXPECT_EQ(reduce_on_device(*nccl, f32, ScalarType::kFloat32), f32);

  std::vector<uint16_t> f16(4099);
  for (size_t i = 0; i < f16.size(); ++i) {
    f16[i] = arcreduce::float_to_fp16(static_cast<float>(i % 512) - 100.5f);
  }
  EXPECT_EQ(reduce_on_device(*nccl, f16, ScalarType::kFloat16), f16);

  std::vector<double> f64 = {1.0, -2.5, 1e300};
  EXPECT_EQ(reduce_on_device(*nccl, f64, ScalarType::kFloat64), f64);
  std::vector<uint16_t> bf16 = {arcreduce::float_to_bf16(3.0f), arcreduce::float_to_bf16(-0.5f)};
  EXPECT_EQ(reduce_on_device(*nccl, bf16, ScalarType::kBFloat16), bf16);

  // count 0 enqueues nothing; a type NCCL is not used for is refused.
  EXPECT_NO_THROW(nccl->allreduce(nullptr, 0, ScalarType::kFloat32, nullptr));
  EXPECT_THROW(nccl->allreduce(nullptr, 4, ScalarType::kInt32, nullptr), Error);
  EXPECT_NO_THROW(nccl->check_async());
}

// Two ranks as two threads, one device each (NCCL needs distinct devices per communicator).
TEST_F(GpuNccl, TwoRanksOnTwoDevicesSumFp32AndFp16) {
  if (device_count() < 2) GTEST_SKIP() << "fewer than two CUDA devices";
  LoopbackWorld world(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = world.communicator(r);
        std::unique_ptr<NcclCommunicator> nccl = NcclCommunicator::create(*comm, r);
        std::vector<float> f32(5000);
        std::vector<uint16_t> f16(5000);
        for (size_t i = 0; i < f32.size(); ++i) {
          f32[i] = static_cast<float>(i) + 1000.0f * static_cast<float>(r);
          f16[i] = arcreduce::float_to_fp16(static_cast<float>(i % 100) + static_cast<float>(r));
        }
        const std::vector<float> s32 = reduce_on_device(*nccl, f32, ScalarType::kFloat32);
        const std::vector<uint16_t> s16 = reduce_on_device(*nccl, f16, ScalarType::kFloat16);
        for (size_t i = 0; i < f32.size(); ++i) {
          // Small integers: exact in both types, whatever the order of the additions.
          if (s32[i] != 2.0f * static_cast<float>(i) + 1000.0f ||
              arcreduce::fp16_to_float(s16[i]) != 2.0f * static_cast<float>(i % 100) + 1.0f) {
            errors[static_cast<size_t>(r)] = "wrong sum at " + std::to_string(i);
            return;
          }
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

}  // namespace
}  // namespace arcreduce_test
