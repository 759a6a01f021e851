// HandleTable: the torch tensors of in-flight ops, keyed by the runtime's handle. Holding a
// reference until synchronize() means Python cannot free a tensor's memory while the
// coordinator thread still reads or writes it. Thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace arcreduce_torch {

class HandleTable {
 public:
  void hold(uint64_t handle, at::Tensor tensor);
  // Removes and returns the tensor of `handle` (undefined if the table has none).
  at::Tensor release(uint64_t handle);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, at::Tensor> tensors_;
};

}  // namespace arcreduce_torch
