// Batched copies for the device path: packing a bucket's tensors into the fusion buffer and
// unpacking (with the average's scaling) takes one kernel launch per CopyBatch, not one per
// tensor. The plan and the per-element work are plain C++ (ARC_HOST_DEVICE), so the CPU build
// tests exactly what the CUDA kernel (ops/cuda/copy_batch.cu) runs.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/communicator.h"
#include "ops/half.h"

namespace arcreduce {

// Segments per launch: the batch travels as a kernel argument (well under CUDA's 4 KiB limit).
constexpr int kMaxCopySegments = 48;

struct CopySpan {
  const void* src;
  void* dst;
  int64_t elements;
};

// Segment s copies elements[s] values from src[s] to dst[s]; blocks [first_block[s],
// first_block[s + 1]) of `block_elements` values each cover it (the last one partly).
struct CopyBatch {
  int segments = 0;
  int64_t block_elements = 0;
  const void* src[kMaxCopySegments];
  void* dst[kMaxCopySegments];
  int64_t elements[kMaxCopySegments];
  int64_t first_block[kMaxCopySegments + 1];
  int64_t blocks() const { return first_block[segments]; }
};

// Consecutive spans, `max_segments` (1..kMaxCopySegments) per batch; empty spans are dropped.
// block_elements >= 1.
std::vector<CopyBatch> plan_copy_batches(const std::vector<CopySpan>& spans, int64_t block_elements,
                                         int max_segments = kMaxCopySegments);

// The segment block `block` belongs to (binary search over first_block).
ARC_HOST_DEVICE inline int copy_batch_segment(const CopyBatch& batch, int64_t block) {
  int lo = 0, hi = batch.segments - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (batch.first_block[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Element `i` of segment `s`: dst = src * factor when `scaled` (fp32 and fp16/bf16 multiply by
// the fp32-rounded factor, in fp32; fp64 in double: as scale() of ops/reduce_kernels.h), else a
// bit copy. Only the floating types.
ARC_HOST_DEVICE inline void copy_batch_element(const CopyBatch& batch, int s, int64_t i,
                                               ScalarType type, bool scaled, double factor) {
  switch (type) {
    case ScalarType::kFloat64: {
      const double v = static_cast<const double*>(batch.src[s])[i];
      static_cast<double*>(batch.dst[s])[i] = scaled ? v * factor : v;
      return;
    }
    case ScalarType::kFloat16: {
      const uint16_t v = static_cast<const uint16_t*>(batch.src[s])[i];
      static_cast<uint16_t*>(batch.dst[s])[i] =
          scaled ? float_to_fp16(fp16_to_float(v) * static_cast<float>(factor)) : v;
      return;
    }
    case ScalarType::kBFloat16: {
      const uint16_t v = static_cast<const uint16_t*>(batch.src[s])[i];
      static_cast<uint16_t*>(batch.dst[s])[i] =
          scaled ? float_to_bf16(bf16_to_float(v) * static_cast<float>(factor)) : v;
      return;
    }
    default: {
      const float v = static_cast<const float*>(batch.src[s])[i];
      static_cast<float*>(batch.dst[s])[i] = scaled ? v * static_cast<float>(factor) : v;
      return;
    }
  }
}

// Block `block` of the batch, as one CUDA thread block does it (the kernel strides `lane` by
// the block's thread count; the CPU reference passes lane 0, stride 1).
ARC_HOST_DEVICE inline void copy_batch_block(const CopyBatch& batch, int64_t block, int64_t lane,
                                             int64_t stride, ScalarType type, bool scaled,
                                             double factor) {
  const int s = copy_batch_segment(batch, block);
  const int64_t begin = (block - batch.first_block[s]) * batch.block_elements;
  int64_t end = begin + batch.block_elements;
  if (end > batch.elements[s]) end = batch.elements[s];
  for (int64_t i = begin + lane; i < end; i += stride) {
    copy_batch_element(batch, s, i, type, scaled, factor);
  }
}

// The whole batch on the calling thread (tests, and the reference for the kernel).
void run_copy_batch_on_host(const CopyBatch& batch, ScalarType type, bool scaled, double factor);

}  // namespace arcreduce
