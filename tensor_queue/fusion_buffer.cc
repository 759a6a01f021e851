#include "tensor_queue/fusion_buffer.h"

#include <cstring>

namespace arcreduce {

void* FusionBuffer::gather(const std::vector<TensorEntry*>& entries) {
  size_t total = 0;
  for (const TensorEntry* e : entries) total += e->signature.bytes();
  if (storage_.size() < total) storage_.resize(total);
  size_t offset = 0;
  for (const TensorEntry* e : entries) {
    const size_t n = e->signature.bytes();
    if (n) std::memcpy(storage_.data() + offset, e->tensor.data, n);
    offset += n;
  }
  return storage_.data();
}

void FusionBuffer::scatter(const std::vector<TensorEntry*>& entries) const {
  size_t offset = 0;
  for (const TensorEntry* e : entries) {
    const size_t n = e->signature.bytes();
    if (n) std::memcpy(e->tensor.data, storage_.data() + offset, n);
    offset += n;
  }
}

}  // namespace arcreduce
