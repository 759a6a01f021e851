#include "ops/cuda/cuda_handles.h"

#include <spdlog/spdlog.h>

#include "ops/cuda/cuda_check.h"

namespace arcreduce {
namespace cuda {
namespace {

void log_failure(cudaError_t code, const char* what) noexcept {
  if (code == cudaSuccess) return;
  try {
    spdlog::warn("arcreduce: {} failed while releasing: {}", what, cuda_error_string(code));
  } catch (...) {
  }
}

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  ARC_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) ARC_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) {
    log_failure(cudaSetDevice(previous_), "cudaSetDevice");
  }
}

Stream::Stream(int device) : device_(device) {
  DeviceGuard guard(device);
  ARC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  if (stream_) log_failure(cudaStreamDestroy(stream_), "cudaStreamDestroy");
}

void Stream::synchronize() const {
  ARC_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Event::Event() {
  ARC_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

Event::~Event() {
  if (event_) log_failure(cudaEventDestroy(event_), "cudaEventDestroy");
}

void Event::record(cudaStream_t stream) {
  ARC_CUDA_CHECK(cudaEventRecord(event_, stream));
}

bool Event::ready() const {
  const cudaError_t rc = cudaEventQuery(event_);
  if (rc == cudaErrorNotReady) return false;
  ARC_CUDA_CHECK(rc);
  return true;
}

void Event::synchronize() const {
  ARC_CUDA_CHECK(cudaEventSynchronize(event_));
}

DeviceMemory::~DeviceMemory() {
  if (data_) log_failure(cudaFree(data_), "cudaFree");
}

void* DeviceMemory::reserve(size_t bytes) {
  if (bytes <= capacity_) return data_;
  if (data_) {
    ARC_CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    capacity_ = 0;
  }
  ARC_CUDA_CHECK(cudaMalloc(&data_, bytes));
  capacity_ = bytes;
  return data_;
}

PinnedMemory::~PinnedMemory() {
  if (data_) log_failure(cudaFreeHost(data_), "cudaFreeHost");
}

void* PinnedMemory::reserve(size_t bytes) {
  if (bytes <= capacity_) return data_;
  if (data_) {
    ARC_CUDA_CHECK(cudaFreeHost(data_));
    data_ = nullptr;
    capacity_ = 0;
  }
  ARC_CUDA_CHECK(cudaMallocHost(&data_, bytes));
  capacity_ = bytes;
  return data_;
}

}  // namespace cuda
}  // namespace arcreduce
