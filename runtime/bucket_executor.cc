#include "runtime/bucket_executor.h"

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

bool is_half(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

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

  size_t count = 0;
  for (const TensorEntry* e : entries) count += static_cast<size_t>(e->signature.elements());
  if (count == 0) return;
  const ScalarType type = scalar_type(signature.dtype);
  const bool average = signature.op == ReduceOp::kAverage && ctx_.size > 1;
  const double inv_size = 1.0 / ctx_.size;

  auto t = std::chrono::steady_clock::now();
  void* data = entries.size() == 1 ? entries[0]->tensor.data : buffer_.gather(entries);
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
  if (entries.size() > 1) buffer_.scatter(entries);
  stats.copy_seconds += seconds_since(t);
}

}  // namespace arcreduce
