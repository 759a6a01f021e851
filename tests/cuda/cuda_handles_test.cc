// ARC_CUDA_CHECK's messages and the RAII handles' failure paths. These run on every CUDA build:
// where no device is usable the handles must fail with the runtime's reason, not crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "arcreduce/status.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_handles.h"
#include "ops/device_query.h"

namespace arcreduce_test {
namespace {

using ::testing::HasSubstr;

bool device_usable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(CudaCheck, MessageCarriesCallFileLineAndRuntimeError) {
  try {
    ARC_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "ARC_CUDA_CHECK did not throw";
  } catch (const arcreduce::Error& e) {
    EXPECT_EQ(e.code(), arcreduce::StatusCode::kInternal);
    EXPECT_THAT(e.what(), HasSubstr("cudaErrorInvalidValue failed at "));
    EXPECT_THAT(e.what(), HasSubstr("cuda_handles_test.cc:"));
    EXPECT_THAT(e.what(), HasSubstr("cudaErrorInvalidValue: invalid argument"));
  }
  EXPECT_NO_THROW(ARC_CUDA_CHECK(cudaSuccess));
}

TEST(CudaCheck, OutOfMemorySaysWhatToLower) {
  try {
    arcreduce::cuda::throw_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc(&p, bytes)", "x.cc",
                                      7);
    FAIL() << "throw_cuda_error returned";
  } catch (const arcreduce::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cudaMalloc(&p, bytes) failed at x.cc:7"));
    EXPECT_THAT(e.what(), HasSubstr("cudaErrorMemoryAllocation"));
    EXPECT_THAT(e.what(), HasSubstr("ARCREDUCE_FUSION_THRESHOLD"));
  }
}

TEST(CudaHandles, WithoutDeviceEveryHandleThrowsTheRuntimeReason) {
  if (device_usable()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(arcreduce::cuda::Stream stream(0), arcreduce::Error);
  EXPECT_THROW(arcreduce::cuda::Event event, arcreduce::Error);
  arcreduce::cuda::DeviceMemory device;
  arcreduce::cuda::PinnedMemory pinned;
  try {
    device.reserve(1024);
    FAIL() << "cudaMalloc without a device did not throw";
  } catch (const arcreduce::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cudaMalloc"));
    EXPECT_THAT(e.what(), HasSubstr("cudaError"));
  }
  EXPECT_THROW(pinned.reserve(1024), arcreduce::Error);
  EXPECT_EQ(device.capacity(), 0u);
  EXPECT_EQ(pinned.capacity(), 0u);
}

TEST(CudaHandles, MemoryGrowsAndKeepsItsSize) {
  if (!device_usable()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  arcreduce::cuda::DeviceMemory device;
  void* first = device.reserve(1000);
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(device.reserve(10), first);
  EXPECT_GE(device.capacity(), 1000u);
  device.reserve(1 << 20);
  EXPECT_GE(device.capacity(), size_t{1} << 20);
  arcreduce::cuda::Stream stream(0);
  arcreduce::cuda::Event event;
  event.record(stream.get());
  event.synchronize();
  EXPECT_TRUE(event.ready());
}

TEST(CudaDeviceQuery, ReportsTheRuntimeStateAndClassifiesPointers) {
  std::unique_ptr<arcreduce::DeviceQuery> query = arcreduce::make_cuda_device_query();
  ASSERT_NE(query, nullptr);
  std::string error;
  const int count = query->device_count(&error);
  if (!device_usable()) {
    EXPECT_EQ(count, 0);
    EXPECT_THAT(error, HasSubstr("cudaError"));
    return;
  }
  EXPECT_GT(count, 0);
  int host = 0;
  EXPECT_EQ(query->pointer_info(&host).kind, arcreduce::PointerKind::kHost);
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 16), cudaSuccess);
  const arcreduce::PointerInfo info = query->pointer_info(dev);
  EXPECT_EQ(info.kind, arcreduce::PointerKind::kDevice);
  cudaFree(dev);
}

}  // namespace
}  // namespace arcreduce_test
