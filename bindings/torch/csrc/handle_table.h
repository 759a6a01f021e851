// HandleTable: the torch tensors of in-flight ops, keyed by the runtime's handle. Holding a
// reference until synchronize() means Python cannot free a tensor's memory while the
// coordinator thread still reads or writes it. Thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace arcreduce_torch {

// The output of an allgather, alltoall or reducescatter, filled by the runtime's allocator on the
// coordinator thread before the op completes.
struct OutputSlot {
  at::Tensor tensor;
  std::vector<int64_t> rows;  // OutputAllocator's rows
};

class HandleTable {
 public:
  struct Held {
    at::Tensor tensor;                   // the input, kept alive until synchronize()
    std::shared_ptr<OutputSlot> output;  // null for in-place ops
  };
  void hold(uint64_t handle, at::Tensor tensor, std::shared_ptr<OutputSlot> output = nullptr);
  // Removes and returns what `handle` holds (an undefined tensor if the table has none).
  Held release(uint64_t handle);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Held> held_;
};

}  // namespace arcreduce_torch
