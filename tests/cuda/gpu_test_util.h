// What the GPU tests share: the reason a test skips without a device, and a device array that
// frees itself.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

namespace arcreduce_gpu_test {

// Empty when a device is usable, else the CUDA runtime's reason.
inline std::string no_device_reason() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) return std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc);
  return count == 0 ? "the CUDA runtime reports 0 devices" : "";
}

// A test's first statement: skips with the runtime's reason when there is no device.
#define ARC_SKIP_WITHOUT_GPU()                                                       \
  do {                                                                               \
    const std::string arc_no_device_ = ::arcreduce_gpu_test::no_device_reason();     \
    if (!arc_no_device_.empty())                                                     \
      GTEST_SKIP() << "no CUDA device (" << arc_no_device_ << "): GPU test skipped"; \
  } while (0)

// n values of device memory (none for n = 0); allocation failures fail the test.
template <class T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(size_t n) {
    if (n) {
      void* raw = nullptr;
      EXPECT_EQ(cudaMalloc(&raw, n * sizeof(T)), cudaSuccess);
      p = static_cast<T*>(raw);
    }
  }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> to_host(size_t n) const {
    std::vector<T> out(n);
    if (n) {
      EXPECT_EQ(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return out;
  }
};

}  // namespace arcreduce_gpu_test
