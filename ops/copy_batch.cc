#include "ops/copy_batch.h"

#include <algorithm>
#include <string>

#include "arcreduce/status.h"

namespace arcreduce {

std::vector<CopyBatch> plan_copy_batches(const std::vector<CopySpan>& spans, int64_t block_elements,
                                         int max_segments) {
  if (block_elements < 1 || max_segments < 1 || max_segments > kMaxCopySegments) {
    throw Error("plan_copy_batches: block_elements " + std::to_string(block_elements) +
                " must be >= 1 and max_segments " + std::to_string(max_segments) + " in 1.." +
                std::to_string(kMaxCopySegments));
  }
  std::vector<CopyBatch> batches;
  for (const CopySpan& span : spans) {
    if (span.elements <= 0) continue;
    if (batches.empty() || batches.back().segments == max_segments) {
      batches.emplace_back();
      batches.back().block_elements = block_elements;
      batches.back().first_block[0] = 0;
    }
    CopyBatch& b = batches.back();
    const int s = b.segments++;
    b.src[s] = span.src;
    b.dst[s] = span.dst;
    b.elements[s] = span.elements;
    b.first_block[s + 1] = b.first_block[s] + (span.elements + block_elements - 1) / block_elements;
  }
  return batches;
}

void run_copy_batch_on_host(const CopyBatch& batch, ScalarType type, bool scaled, double factor) {
  for (int64_t block = 0; block < batch.blocks(); ++block) {
    copy_batch_block(batch, block, 0, 1, type, scaled, factor);
  }
}

}  // namespace arcreduce
