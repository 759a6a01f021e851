#include <gtest/gtest.h>

#include <numeric>

#include "tensor_queue/fusion_buffer.h"

namespace arcreduce {
namespace {

struct Bucket {
  std::vector<std::vector<float>> storage;
  std::vector<TensorEntry> entries;
  std::vector<TensorEntry*> pointers;

  explicit Bucket(const std::vector<int64_t>& sizes) {
    storage.reserve(sizes.size());
    entries.reserve(sizes.size());
    for (int64_t n : sizes) {
      storage.emplace_back(static_cast<size_t>(n));
      TensorEntry e;
      e.tensor = Tensor{storage.back().data(), DType::kFloat32, {n}};
      e.signature.shape = {n};
      entries.push_back(e);
    }
    for (auto& e : entries) pointers.push_back(&e);
  }
};

TEST(PlanChunks, CoversEveryByteOnceInOrder) {
  Bucket b({3, 0, 1000, 5, 7, 250, 1, 2048});
  auto chunks = plan_chunks(b.pointers, 1024, 4);  // 256 floats per chunk
  std::vector<const uint8_t*> covered;
  for (const Chunk& c : chunks) {
    size_t sum = 0;
    for (const Piece& p : c.pieces) {
      sum += p.bytes;
      for (size_t i = 0; i < p.bytes; ++i) covered.push_back(p.data + i);
    }
    EXPECT_EQ(sum, c.bytes);
    EXPECT_LE(c.bytes, 1024u);
    EXPECT_EQ(c.bytes % 4, 0u);
  }
  std::vector<const uint8_t*> expected;
  for (auto& s : b.storage) {
    auto* p = reinterpret_cast<const uint8_t*>(s.data());
    for (size_t i = 0; i < s.size() * 4; ++i) expected.push_back(p + i);
  }
  EXPECT_EQ(covered, expected);
}

TEST(PlanChunks, LargeTensorsInPlaceSmallOnesPacked) {
  Bucket b({10, 20, 600, 30, 256});
  auto chunks = plan_chunks(b.pointers, 1024, 4);
  // [10, 20] staged; 600 floats = 2400 bytes -> 1024 + 1024 + 352 in place; [30] staged;
  // 256 floats = exactly one chunk, in place.
  ASSERT_EQ(chunks.size(), 6u);
  EXPECT_EQ(chunks[0].pieces.size(), 2u);
  EXPECT_EQ(chunks[0].bytes, 120u);
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(chunks[i].pieces.size(), 1u);
  EXPECT_EQ(chunks[1].pieces[0].data, reinterpret_cast<uint8_t*>(b.storage[2].data()));
  EXPECT_EQ(chunks[3].bytes, 352u);
  EXPECT_EQ(chunks[4].bytes, 120u);
  EXPECT_EQ(chunks[5].pieces.size(), 1u);
  EXPECT_EQ(chunks[5].bytes, 1024u);
}

TEST(PlanChunks, EmptyBucketAndTinyLimit) {
  Bucket empty({0, 0});
  EXPECT_TRUE(plan_chunks(empty.pointers, 1024, 4).empty());
  Bucket b({3});
  auto chunks = plan_chunks(b.pointers, 1, 4);  // limit rounds up to one element
  ASSERT_EQ(chunks.size(), 3u);
  for (const auto& c : chunks) EXPECT_EQ(c.bytes, 4u);
}

TEST(FusionBuffer, GatherScatterRoundTrip) {
  Bucket b({3, 4, 5});
  for (size_t t = 0; t < 3; ++t) std::iota(b.storage[t].begin(), b.storage[t].end(), 10.0f * t);
  auto chunks = plan_chunks(b.pointers, 1 << 20, 4);
  ASSERT_EQ(chunks.size(), 1u);
  FusionBuffer buffer;
  auto* staged = static_cast<float*>(buffer.gather(chunks[0]));
  EXPECT_EQ(staged[0], 0.0f);
  EXPECT_EQ(staged[3], 10.0f);
  EXPECT_EQ(staged[11], 24.0f);
  for (int i = 0; i < 12; ++i) staged[i] = -static_cast<float>(i);
  buffer.scatter(chunks[0]);
  EXPECT_EQ(b.storage[0][2], -2.0f);
  EXPECT_EQ(b.storage[1][0], -3.0f);
  EXPECT_EQ(b.storage[2][4], -11.0f);
}

}  // namespace
}  // namespace arcreduce
