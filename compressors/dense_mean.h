// The exact mean of fp32 tensors, fused into one sum All-Reduce: the building block for dense
// fallbacks inside compressors and for error feedback's warm start.
#pragma once

#include <vector>

#include "compressors/compressor.h"

namespace arcreduce {

// output = mean over ranks of input, contribution = input, for every tensor in `tensors`
// (pointers into a bucket). One All-Reduce for all of them; none when they are all empty.
void dense_mean(const std::vector<CompressTensor*>& tensors, Communicator& comm);

// Collective-friendly packing: a flat fp32 buffer holding segments back to back. clear() keeps
// the storage, and appended space is not zeroed, so a reused buffer costs no memory traffic.
class PackedBuffer {
 public:
  // Reserves `n` floats (uninitialised) at the end and returns their offset.
  size_t append(size_t n);
  float* at(size_t offset) { return storage_.data() + offset; }
  float* data() { return storage_.data(); }
  size_t size() const { return size_; }
  void clear() { size_ = 0; }

 private:
  std::vector<float> storage_;
  size_t size_ = 0;
};

}  // namespace arcreduce
