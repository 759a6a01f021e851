// FusionBuffer: one contiguous staging area per runtime that a bucket's tensors are gathered
// into before the collective and scattered back from afterwards. Reused across buckets; grows to
// the largest bucket seen (at most the fusion threshold, or one unfused tensor's size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class FusionBuffer {
 public:
  // Copies the entries' data back to back into the buffer; returns its start.
  void* gather(const std::vector<TensorEntry*>& entries);
  // Copies the buffer's contents back into the entries, in the same layout as gather().
  void scatter(const std::vector<TensorEntry*>& entries) const;
  size_t capacity() const { return storage_.size(); }

 private:
  std::vector<uint8_t> storage_;
};

}  // namespace arcreduce
