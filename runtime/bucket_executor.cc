#include "runtime/bucket_executor.h"

#include <algorithm>
#include <chrono>

#include "ops/reduce_kernels.h"

namespace arcreduce {
namespace {

ScalarType scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ScalarType::kFloat32;
    case DType::kFloat64:
      return ScalarType::kFloat64;
    case DType::kFloat16:
      return ScalarType::kFloat16;
    case DType::kBFloat16:
      return ScalarType::kBFloat16;
  }
  return ScalarType::kFloat32;
}

// Collective size. On one host reduction is memory-bound: small chunks keep the staging copy
// and MPI's internal passes in cache (docs/benchmarks.md: 256 KiB-1 MiB chunks take 0.4-0.5x the
// time of one fused MPI_Allreduce, whole 64 MiB buckets 1.1-1.2x). Across hosts each collective
// pays network latency per ring step, so chunks are larger there.
constexpr size_t kSingleHostChunkBytes = size_t{512} << 10;
constexpr size_t kMultiHostChunkBytes = size_t{4} << 20;

bool is_half(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

BucketExecutor::BucketExecutor(Context& ctx)
    : ctx_(ctx),
      chunk_bytes_(ctx.comm->local_size() == ctx.comm->size() ? kSingleHostChunkBytes
                                                              : kMultiHostChunkBytes) {}

void BucketExecutor::run(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
                         Stats& stats) {
  const std::string& compressor = signature.compression.compressor;
  CompressorStats& cstats = stats.compressors[compressor];
  cstats.tensors += entries.size();
  if (compressor != "none") {
    // Compressors other than the dense path are not part of this build yet: reduce exactly.
    cstats.dense_fallbacks += entries.size();
    if (warned_compressors_.insert(compressor).second) {
      ctx_.log->info("compressor '{}' is not available in this build; reducing its tensors densely",
                     compressor);
    }
  }
  ++stats.buckets;

  const ScalarType type = scalar_type(signature.dtype);
  const size_t element = dtype_size(signature.dtype);
  const bool average = signature.op == ReduceOp::kAverage && ctx_.size > 1;
  const double inv_size = 1.0 / ctx_.size;

  for (const Chunk& chunk : plan_chunks(entries, chunk_bytes_, element)) {
    const size_t count = chunk.bytes / element;
    const bool in_place = chunk.pieces.size() == 1;
    auto t = std::chrono::steady_clock::now();
    void* data = in_place ? chunk.pieces[0].data : buffer_.gather(chunk);
    if (average && is_half(signature.dtype)) scale(data, count, type, inv_size);
    stats.copy_seconds += seconds_since(t);

    t = std::chrono::steady_clock::now();
    const TrafficCounters before = ctx_.comm->traffic();
    ctx_.comm->allreduce(data, count, type, CollectiveOp::kSum);
    const TrafficCounters after = ctx_.comm->traffic();
    cstats.bytes_sent += after.bytes_sent - before.bytes_sent;
    cstats.bytes_received += after.bytes_received - before.bytes_received;
    stats.communication_seconds += seconds_since(t);

    t = std::chrono::steady_clock::now();
    if (average && !is_half(signature.dtype)) scale(data, count, type, inv_size);
    if (!in_place) buffer_.scatter(chunk);
    stats.copy_seconds += seconds_since(t);
  }
}

}  // namespace arcreduce
