#include "compressors/dense_mean.h"

#include <algorithm>
#include <cstring>

#include "compressors/kernels/kernels.h"

namespace arcreduce {

size_t PackedBuffer::append(size_t n) {
  const size_t offset = size_;
  if (offset + n > storage_.size()) storage_.resize(std::max(offset + n, 2 * storage_.size()));
  size_ += n;
  return offset;
}

void dense_mean(const std::vector<CompressTensor*>& tensors, Communicator& comm) {
  PackedBuffer buffer;
  std::vector<size_t> offsets;
  for (CompressTensor* t : tensors) {
    offsets.push_back(buffer.append(t->elements));
    if (t->elements) std::memcpy(buffer.at(offsets.back()), t->input, t->elements * sizeof(float));
  }
  if (buffer.size()) {
    comm.allreduce(buffer.data(), buffer.size(), ScalarType::kFloat32, CollectiveOp::kSum);
    kernels::scale(buffer.data(), buffer.size(), 1.0f / static_cast<float>(comm.size()));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    CompressTensor* t = tensors[i];
    if (!t->elements) continue;
    std::memcpy(t->output, buffer.at(offsets[i]), t->elements * sizeof(float));
    if (t->contribution) std::memcpy(t->contribution, t->input, t->elements * sizeof(float));
  }
}

}  // namespace arcreduce
