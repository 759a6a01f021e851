#include "ops/staging_chunks.h"

#include <algorithm>
#include <string>

#include "arcreduce/status.h"

namespace arcreduce {

std::vector<StagingChunk> plan_staging_chunks(size_t bytes, size_t element_bytes,
                                              size_t chunk_bytes) {
  if (element_bytes == 0 || bytes % element_bytes != 0) {
    throw Error("plan_staging_chunks: " + std::to_string(bytes) +
                    " bytes are not whole elements of " + std::to_string(element_bytes) + " bytes",
                StatusCode::kInternal);
  }
  const size_t step = std::max(element_bytes, chunk_bytes / element_bytes * element_bytes);
  std::vector<StagingChunk> chunks;
  for (size_t offset = 0; offset < bytes; offset += step) {
    chunks.push_back({offset, std::min(step, bytes - offset)});
  }
  return chunks;
}

}  // namespace arcreduce
