// The chunking of the device path's pinned staging.
#include "ops/staging_chunks.h"

#include <gtest/gtest.h>

#include "arcreduce/status.h"

namespace arcreduce {
namespace {

TEST(StagingChunks, CoverTheBufferInOrderWithoutSplittingElements) {
  for (size_t element : {size_t{2}, size_t{4}, size_t{8}}) {
    for (size_t elements : {size_t{0}, size_t{1}, size_t{999}, size_t{1000}, size_t{1001}}) {
      for (size_t chunk : {size_t{1}, size_t{7}, size_t{4000}, size_t{1} << 22}) {
        const size_t bytes = elements * element;
        const std::vector<StagingChunk> chunks = plan_staging_chunks(bytes, element, chunk);
        size_t next = 0;
        const size_t limit = std::max(element, chunk / element * element);
        for (const StagingChunk& c : chunks) {
          EXPECT_EQ(c.offset, next);
          EXPECT_GT(c.bytes, 0u);
          EXPECT_LE(c.bytes, limit);
          EXPECT_EQ(c.bytes % element, 0u);
          next += c.bytes;
        }
        EXPECT_EQ(next, bytes) << element << " " << elements << " " << chunk;
        // Only the last chunk may be short.
        for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_EQ(chunks[i].bytes, limit);
      }
    }
  }
}

TEST(StagingChunks, TwelveMebibytesInFourMebibyteChunks) {
  const std::vector<StagingChunk> chunks =
      plan_staging_chunks(size_t{12} << 20, 4, size_t{4} << 20);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[2].offset, size_t{8} << 20);
}

TEST(StagingChunks, RejectsPartialElements) {
  EXPECT_THROW(plan_staging_chunks(10, 4, 1024), Error);
  EXPECT_THROW(plan_staging_chunks(8, 0, 1024), Error);
}

}  // namespace
}  // namespace arcreduce
