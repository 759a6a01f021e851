// Executing a fused bucket chunk by chunk. plan_chunks() splits a bucket into chunks of at most
// `chunk_bytes`: a tensor at least that large is cut into chunks of its own, reduced in its own
// memory; smaller tensors are packed, in order, into chunks that are staged through the
// FusionBuffer. So no large tensor is ever copied, and the staging buffer holds one chunk and
// stays in cache. The plan is a pure function of the bucket, identical on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

struct Piece {
  uint8_t* data;
  size_t bytes;
};

// One collective's worth of the bucket: a single piece is reduced in place, several are staged.
struct Chunk {
  std::vector<Piece> pieces;
  size_t bytes = 0;
};

// Empty tensors contribute no pieces. Chunks never split an element: tensors smaller than
// `chunk_bytes` are never split at all, larger ones at multiples of `element_bytes`.
std::vector<Chunk> plan_chunks(const std::vector<TensorEntry*>& entries, size_t chunk_bytes,
                               size_t element_bytes);

class FusionBuffer {
 public:
  // Copies the chunk's pieces back to back into the buffer; returns its start.
  void* gather(const Chunk& chunk);
  // Copies the buffer's contents back into the chunk's pieces.
  void scatter(const Chunk& chunk) const;
  // The buffer, as gather() filled it.
  const uint8_t* data() const { return storage_.data(); }

 private:
  std::vector<uint8_t> storage_;
};

}  // namespace arcreduce
