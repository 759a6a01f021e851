#include "tensor_queue/fusion_buffer.h"

#include <algorithm>
#include <cstring>

namespace arcreduce {

std::vector<Chunk> plan_chunks(const std::vector<TensorEntry*>& entries, size_t chunk_bytes,
                               size_t element_bytes) {
  const size_t limit = std::max(element_bytes, chunk_bytes / element_bytes * element_bytes);
  std::vector<Chunk> chunks;
  Chunk staged;
  auto flush = [&] {
    if (!staged.pieces.empty()) chunks.push_back(std::move(staged));
    staged = Chunk();
  };
  for (const TensorEntry* e : entries) {
    const size_t n = e->signature.bytes();
    auto* data = static_cast<uint8_t*>(e->tensor.data);
    if (n == 0) continue;
    if (n >= limit) {
      flush();
      for (size_t off = 0; off < n; off += limit) {
        const size_t take = std::min(limit, n - off);
        chunks.push_back(Chunk{{Piece{data + off, take}}, take});
      }
      continue;
    }
    if (staged.bytes + n > limit) flush();
    staged.pieces.push_back(Piece{data, n});
    staged.bytes += n;
  }
  flush();
  return chunks;
}

void* FusionBuffer::gather(const Chunk& chunk) {
  if (storage_.size() < chunk.bytes) storage_.resize(chunk.bytes);
  size_t offset = 0;
  for (const Piece& p : chunk.pieces) {
    std::memcpy(storage_.data() + offset, p.data, p.bytes);
    offset += p.bytes;
  }
  return storage_.data();
}

void FusionBuffer::scatter(const Chunk& chunk) const {
  size_t offset = 0;
  for (const Piece& p : chunk.pieces) {
    std::memcpy(p.data, storage_.data() + offset, p.bytes);
    offset += p.bytes;
  }
}

}  // namespace arcreduce
