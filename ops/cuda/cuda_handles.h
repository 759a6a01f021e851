// RAII owners of CUDA handles and memory. Constructors and growth throw arcreduce::Error
// (ARC_CUDA_CHECK); destructors are noexcept and log a failure instead of throwing. Handles
// borrowed from a framework (its streams and ready events) are never wrapped here: the runtime
// only waits on them. Not thread-safe: the coordinator thread owns these.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace arcreduce {
namespace cuda {

// Makes `device` current for the scope; restores the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// A non-blocking stream of `device`, created by and owned by the runtime.
class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// An event without timing (the cheapest kind), created on the current device.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  // True once the recorded work has finished (cudaEventQuery; errors throw).
  bool ready() const;
  void synchronize() const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Device memory (cudaMalloc) that grows on demand and keeps its size; contents are not kept
// when it grows, and the caller makes sure no queued work still uses the old memory then.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* reserve(size_t bytes);
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Page-locked host memory (cudaMallocHost), so device copies can be asynchronous; as
// DeviceMemory otherwise.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  ~PinnedMemory();
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  void* reserve(size_t bytes);
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace cuda
}  // namespace arcreduce
