// Counters of one compressor on this rank, part of arcreduce::Stats (arcreduce/stats.h).
#pragma once

#include <cstdint>

namespace arcreduce {

struct CompressorStats {
  uint64_t tensors = 0;     // tensor reductions that went through this compressor
  uint64_t bytes_sent = 0;  // bytes this rank sent for them
  uint64_t bytes_received = 0;
  uint64_t dense_fallbacks = 0;  // tensors reduced densely although this compressor was asked
  // Payload this rank contributed, by kind (before the collective's own overhead).
  uint64_t sketch_bytes = 0;    // ARC-Top-K sketches
  uint64_t value_bytes = 0;     // gradient values (selected rows/entries, dense fallbacks)
  uint64_t index_bytes = 0;     // indices (All-Gather Top-K only)
  uint64_t selected_rows = 0;   // rows kept by row-based selections
  uint64_t warmup_tensors = 0;  // tensors reduced densely during ARCREDUCE_WARMUP_STEPS
};

}  // namespace arcreduce
