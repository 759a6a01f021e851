// The batching plan of the device path's pack/unpack and the per-block work the CUDA kernel
// runs, executed on the host against a naive reference (concatenation, then scale() of
// ops/reduce_kernels.h, which the CPU path uses).
#include "ops/copy_batch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "arcreduce/status.h"
#include "ops/reduce_kernels.h"

namespace arcreduce {
namespace {

// memcmp() of `n` bytes, defined for n == 0 too: the data() of an empty vector may be null,
// which memcmp must not be given even with a zero length.
bool same_bytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

void fill_values(void* data, size_t count, ScalarType type, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (size_t i = 0; i < count; ++i) {
    const float v = dist(gen);
    switch (type) {
      case ScalarType::kFloat64:
        static_cast<double*>(data)[i] = static_cast<double>(v) / 3.0;
        break;
      case ScalarType::kFloat16:
        static_cast<uint16_t*>(data)[i] = float_to_fp16(v);
        break;
      case ScalarType::kBFloat16:
        static_cast<uint16_t*>(data)[i] = float_to_bf16(v);
        break;
      default:
        static_cast<float*>(data)[i] = v;
    }
  }
}

TEST(CopyBatchPlan, SplitsEverySegmentsIntoBlocksAndBatches) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 130; ++i) sizes.push_back(i % 7 == 0 ? 0 : (i * 37) % 301 + 1);
  std::vector<float> src(1), dst(1);
  std::vector<CopySpan> spans;
  for (int64_t n : sizes) spans.push_back({src.data(), dst.data(), n});
  const int64_t block = 16;
  for (int max_segments : {1, 5, kMaxCopySegments}) {
    const std::vector<CopyBatch> batches = plan_copy_batches(spans, block, max_segments);
    size_t nonempty = 0;
    for (int64_t n : sizes) nonempty += n > 0;
    ASSERT_EQ(batches.size(), (nonempty + max_segments - 1) / max_segments) << max_segments;
    size_t next = 0;  // index into sizes
    for (const CopyBatch& b : batches) {
      ASSERT_GE(b.segments, 1);
      ASSERT_LE(b.segments, max_segments);
      EXPECT_EQ(b.first_block[0], 0);
      for (int s = 0; s < b.segments; ++s) {
        while (sizes[next] == 0) ++next;
        EXPECT_EQ(b.elements[s], sizes[next]);
        EXPECT_EQ(b.first_block[s + 1] - b.first_block[s], (sizes[next] + block - 1) / block);
        ++next;
        for (int64_t k = b.first_block[s]; k < b.first_block[s + 1]; ++k) {
          EXPECT_EQ(copy_batch_segment(b, k), s) << "block " << k;
        }
      }
    }
  }
}

TEST(CopyBatchPlan, RejectsBadArguments) {
  std::vector<CopySpan> spans;
  EXPECT_THROW(plan_copy_batches(spans, 0), Error);
  EXPECT_THROW(plan_copy_batches(spans, 4, 0), Error);
  EXPECT_THROW(plan_copy_batches(spans, 4, kMaxCopySegments + 1), Error);
  EXPECT_TRUE(plan_copy_batches(spans, 4).empty());
  spans.push_back({nullptr, nullptr, 0});
  EXPECT_TRUE(plan_copy_batches(spans, 4).empty());
}

// Pack a bucket into a fused buffer and unpack it with a scale, as the device path does, and
// compare with memcpy + scale().
TEST(CopyBatchHost, PackAndScaledUnpackMatchNaiveReference) {
  const std::vector<int64_t> sizes = {1, 0, 4095, 4096, 4097, 3, 10000, 1, 129};
  const ScalarType types[] = {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16,
                              ScalarType::kBFloat16};
  for (ScalarType type : types) {
    for (int64_t block : {int64_t{1}, int64_t{7}, int64_t{4096}}) {
      const size_t element = scalar_size(type);
      int64_t total = 0;
      for (int64_t n : sizes) total += n;
      std::vector<std::vector<uint8_t>> tensors;
      for (size_t i = 0; i < sizes.size(); ++i) {
        tensors.emplace_back(sizes[i] * element);
        fill_values(tensors.back().data(), sizes[i], type, static_cast<uint32_t>(i + 1));
      }
      std::vector<uint8_t> fused(total * element, 0xAB), expect_fused;
      std::vector<CopySpan> pack, unpack;
      size_t offset = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        pack.push_back({tensors[i].data(), fused.data() + offset, sizes[i]});
        unpack.push_back({fused.data() + offset, tensors[i].data(), sizes[i]});
        expect_fused.insert(expect_fused.end(), tensors[i].begin(), tensors[i].end());
        offset += sizes[i] * element;
      }
      for (const CopyBatch& b : plan_copy_batches(pack, block, 4)) {
        run_copy_batch_on_host(b, type, false, 1.0);
      }
      ASSERT_EQ(fused, expect_fused) << scalar_type_name(type) << " block " << block;

      const double factor = 1.0 / 3.0;
      std::vector<uint8_t> expect_scaled = expect_fused;
      scale(expect_scaled.data(), total, type, factor);
      for (const CopyBatch& b : plan_copy_batches(unpack, block, 4)) {
        run_copy_batch_on_host(b, type, true, factor);
      }
      offset = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        ASSERT_TRUE(same_bytes(tensors[i].data(), expect_scaled.data() + offset, tensors[i].size()))
            << scalar_type_name(type) << " tensor " << i << " block " << block;
        offset += tensors[i].size();
      }
    }
  }
}

TEST(CopyBatchHost, UnscaledCopyKeepsBitPatterns) {
  // NaN payloads and signed zeros survive a pack (a copy, not arithmetic).
  std::vector<uint32_t> src = {0x7fc12345u, 0x80000000u, 0x7f800001u, 0x00000001u};
  std::vector<uint32_t> dst(src.size(), 0);
  for (const CopyBatch& b :
       plan_copy_batches({{src.data(), dst.data(), static_cast<int64_t>(src.size())}}, 3)) {
    run_copy_batch_on_host(b, ScalarType::kFloat32, false, 1.0);
  }
  EXPECT_EQ(dst, src);
}

}  // namespace
}  // namespace arcreduce
