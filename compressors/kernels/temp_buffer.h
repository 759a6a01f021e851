// Scratch memory of the system an execution policy runs on (host memory for Thrust's CPP
// system, device memory for CUDA), released when the buffer goes out of scope.
#pragma once

#include <thrust/memory.h>

#include <cstddef>
#include <utility>

namespace arcreduce {
namespace kernels {
namespace impl {

template <class T, class Exec>
class TempBuffer {
 public:
  TempBuffer(Exec& exec, std::ptrdiff_t n) : exec_(exec) {
    if (n <= 0) return;
    auto got = thrust::get_temporary_buffer<T>(exec_, n);
    data_ = thrust::raw_pointer_cast(got.first);
    size_ = got.second;
  }
  ~TempBuffer() {
    if (data_ != nullptr) thrust::return_temporary_buffer(exec_, data_, size_);
  }
  TempBuffer(const TempBuffer&) = delete;
  TempBuffer& operator=(const TempBuffer&) = delete;

  T* get() const { return data_; }

 private:
  Exec& exec_;
  T* data_ = nullptr;
  std::ptrdiff_t size_ = 0;
};

// Deduces Exec: `auto buf = make_temp<float>(exec, n);` (guaranteed copy elision in C++17).
template <class T, class Exec>
TempBuffer<T, std::remove_reference_t<Exec>> make_temp(Exec& exec, std::ptrdiff_t n) {
  return TempBuffer<T, std::remove_reference_t<Exec>>(exec, n);
}

}  // namespace impl
}  // namespace kernels
}  // namespace arcreduce
