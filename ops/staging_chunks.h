// How the device path stages a fused buffer through pinned host memory: consecutive chunks,
// each copied off the device, reduced on the host and copied back while the next one is reduced.
#pragma once

#include <cstddef>
#include <vector>

namespace arcreduce {

struct StagingChunk {
  size_t offset;  // bytes from the start of the buffer
  size_t bytes;
};

// Chunks covering [0, bytes) in order, each at most max(chunk_bytes rounded down to whole
// elements, one element) long; no element is split. bytes must be a multiple of element_bytes
// (>= 1), else Error. bytes 0: no chunks.
std::vector<StagingChunk> plan_staging_chunks(size_t bytes, size_t element_bytes,
                                              size_t chunk_bytes);

}  // namespace arcreduce
