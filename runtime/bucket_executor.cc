#include "runtime/bucket_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "compressors/error_feedback.h"
#include "compressors/feedback_kinds.h"
#include "compressors/kernels/kernels.h"
#include "compressors/registry.h"
#include "ops/reduce_kernels.h"
#include "runtime/compressor_config.h"
#include "runtime/reduce_dtype.h"

namespace arcreduce {
namespace {

// Collective size. On one host reduction is memory-bound: small chunks keep the staging copy
// and MPI's internal passes in cache. Across hosts each collective pays network latency per ring
// step and TCP restarts its flow, so a bucket up to the default fusion threshold goes as one
// ring there. (The measurements behind both sizes: docs/results/benchmarks-log.md.)
constexpr size_t kSingleHostChunkBytes = size_t{512} << 10;
constexpr size_t kMultiHostChunkBytes = size_t{64} << 20;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

BucketExecutor::BucketExecutor(Context& ctx, StateStore& state)
    : ctx_(ctx),
      state_(state),
      options_(compressor_options(ctx.config)),
      dense_options_(options_),
      chunk_bytes_(ctx.comm->local_size() == ctx.comm->size() ? kSingleHostChunkBytes
                                                              : kMultiHostChunkBytes),
      device_(ctx.device_executor_factory ? ctx.device_executor_factory(ctx)
                                          : make_device_executor(ctx, state)) {
  dense_options_.feedback.dense = true;
}

std::unique_ptr<DeviceCompletion> BucketExecutor::run(const std::vector<TensorEntry*>& entries,
                                                      const TensorSignature& signature,
                                                      Stats& stats) {
  phases_.clear();
  ++stats.buckets;
  if (signature.collective == Collective::kJoin) {  // negotiated only: nothing to move
    phases_.end();
    return nullptr;
  }
  if (shaped_by_every_rank(signature.collective)) {
    for (TensorEntry* e : entries) run_shaped(*e, signature, stats);
    phases_.end();
    return nullptr;
  }
  if (signature.collective == Collective::kBroadcast) {
    // CUDA broadcasts are refused at submission (Runtime::broadcast_async).
    run_broadcast(entries, signature, stats);
    phases_.end();
    return nullptr;
  }
  CompressorStats& cstats = stats.compressors[signature.compression.compressor];
  cstats.tensors += entries.size();
  std::unique_ptr<DeviceCompletion> pending;
  if (signature.device == Device::kCUDA) {
    if (!device_) {
      throw Error("a CUDA bucket reached a build of arcreduce without CUDA", StatusCode::kInternal);
    }
    pending = device_->run(entries, signature, stats, cstats, phases_,
                           [&](const std::vector<TensorEntry*>& host_copies) {
                             run_host(host_copies, signature, stats, cstats);
                           });
  } else {
    run_host(entries, signature, stats, cstats);
  }
  phases_.end();
  return pending;
}

void BucketExecutor::run_host(const std::vector<TensorEntry*>& entries,
                              const TensorSignature& signature, Stats& stats,
                              CompressorStats& cstats) {
  const CompressorTraits* traits = find_compressor(signature.compression.compressor);
  if (traits && traits->native()) {
    run_dense(entries, signature, stats, cstats);
    return;
  }
  std::lock_guard<std::mutex> lock(state_.mutex());
  // A compressor or error feedback that runs its warm-up itself gets every step (efm carries the
  // optimizer's momentum, which a plain dense warm-up would drop: error_feedback.h).
  const FeedbackRow* feedback = find_feedback(signature.compression.error_feedback);
  const bool warms_up_itself =
      (traits && traits->does_own_warmup) || (feedback && feedback->does_own_warmup);
  // A dense step of ARCREDUCE_AUTO_COMPRESS is a warm-up step: run here, or by efm itself.
  const bool dense_now = automatic_dense_ && signature.compression.automatic;
  int64_t warmup = warms_up_itself ? 0 : ctx_.config.warmup_steps;
  if (dense_now && !warms_up_itself) warmup = std::numeric_limits<int64_t>::max();
  const WarmupSplit split = split_warmup(entries, state_, warmup);
  if (!split.warmup.empty()) {
    cstats.warmup_tensors += split.warmup.size();
    run_dense(split.warmup, signature, stats, cstats);
  }
  if (!split.compressed.empty()) run_compressed(split.compressed, signature, stats, cstats);
}

Compressor& BucketExecutor::pipeline(const CompressionSpec& spec) {
  const std::string key = spec.compressor + "/" + spec.error_feedback;
  auto it = pipelines_.find(key);
  if (it == pipelines_.end()) {
    std::unique_ptr<Compressor> inner = make_compressor(spec.compressor);
    if (!inner) {
      throw Error("compressor '" + spec.compressor + "' is not available in this build",
                  StatusCode::kInvalidArgument);
    }
    it = pipelines_.emplace(key, with_error_feedback(std::move(inner), spec.error_feedback, state_))
             .first;
  }
  return *it->second;
}

void BucketExecutor::run_compressed(const std::vector<TensorEntry*>& entries,
                                    const TensorSignature& signature, Stats& stats,
                                    CompressorStats& cstats) {
  auto t = std::chrono::steady_clock::now();
  phases_.begin("fuse", "fuse");
  // Error-feedback decorators consume their input before they write their output, and so do
  // compressors that say reduces_in_place(): fp32 tensors are then reduced in their own memory,
  // without working copies.
  const FeedbackRow* feedback = find_feedback(signature.compression.error_feedback);
  const bool decorated = feedback && feedback->kind != FeedbackKind::kNone;
  const bool in_place = signature.dtype == DType::kFloat32 &&
                        (decorated || pipeline(signature.compression).reduces_in_place());
  inputs_.resize(entries.size());
  outputs_.resize(entries.size());
  std::vector<CompressTensor> bucket(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry& e = *entries[i];
    const auto n = static_cast<size_t>(e.signature.elements());
    CompressTensor& c = bucket[i];
    c.name = e.name;
    c.shape = e.signature.shape;
    c.elements = n;
    c.step = state_.get(e.name, n).compressed_steps;
    if (in_place) {
      c.input = c.output = static_cast<float*>(e.tensor.data);
      continue;
    }
    inputs_[i].resize(n);
    outputs_[i].resize(n);
    kernels::to_float(e.tensor.data, e.signature.dtype, inputs_[i].data(), n);
    c.input = inputs_[i].data();
    c.output = outputs_[i].data();
  }
  stats.copy_seconds += seconds_since(t);

  t = std::chrono::steady_clock::now();
  const TrafficCounters before = ctx_.comm->traffic();
  const bool dense_now = automatic_dense_ && signature.compression.automatic;
  CompressContext context{*ctx_.comm,
                          dense_now ? dense_options_ : options_,
                          signature.compression,
                          cstats,
                          ctx_.log,
                          &state_,
                          &phases_};
  pipeline(signature.compression).reduce(bucket, context);
  const TrafficCounters after = ctx_.comm->traffic();
  cstats.bytes_sent += after.bytes_sent - before.bytes_sent;
  cstats.bytes_received += after.bytes_received - before.bytes_received;
  stats.compression_seconds += seconds_since(t);

  t = std::chrono::steady_clock::now();
  phases_.begin("unpack", "decompress");
  const float sum_factor = static_cast<float>(ctx_.size);
  for (size_t i = 0; i < entries.size(); ++i) {
    TensorEntry& e = *entries[i];
    if (signature.op == ReduceOp::kSum)
      kernels::scale(bucket[i].output, bucket[i].elements, sum_factor);
    if (!in_place) {
      kernels::from_float(bucket[i].output, e.signature.dtype, e.tensor.data, bucket[i].elements);
    }
    ++state_.get(e.name, bucket[i].elements).compressed_steps;
  }
  stats.copy_seconds += seconds_since(t);
}

void BucketExecutor::run_dense(const std::vector<TensorEntry*>& entries,
                               const TensorSignature& signature, Stats& stats,
                               CompressorStats& cstats) {
  const ScalarType type = reduce_scalar_type(signature.dtype);
  const size_t element = dtype_size(signature.dtype);
  const bool average = signature.op == ReduceOp::kAverage && ctx_.size > 1;
  const double inv_size = 1.0 / ctx_.size;

  for (const Chunk& chunk : plan_chunks(entries, chunk_bytes_, element)) {
    const size_t count = chunk.bytes / element;
    const bool in_place = chunk.pieces.size() == 1;
    auto t = std::chrono::steady_clock::now();
    phases_.begin("pack", "fuse");
    void* data = in_place ? chunk.pieces[0].data : buffer_.gather(chunk);
    if (average && scales_before_sum(signature.dtype)) scale(data, count, type, inv_size);
    stats.copy_seconds += seconds_since(t);

    t = std::chrono::steady_clock::now();
    phases_.begin("values collective", "communicate");
    const TrafficCounters before = ctx_.comm->traffic();
    ctx_.comm->allreduce(data, count, type, reduce_collective_op(signature.op));
    const TrafficCounters after = ctx_.comm->traffic();
    cstats.bytes_sent += after.bytes_sent - before.bytes_sent;
    cstats.bytes_received += after.bytes_received - before.bytes_received;
    stats.communication_seconds += seconds_since(t);

    t = std::chrono::steady_clock::now();
    phases_.begin("unpack", "decompress");
    if (!average || scales_before_sum(signature.dtype)) {
      if (!in_place) buffer_.scatter(chunk);
    } else if (in_place) {
      scale(data, count, type, inv_size);
    } else {
      // Averaged while copied back: one pass over the chunk instead of two.
      size_t offset = 0;
      for (const Piece& p : chunk.pieces) {
        scale_copy(p.data, buffer_.data() + offset, p.bytes / element, type, inv_size);
        offset += p.bytes;
      }
    }
    stats.copy_seconds += seconds_since(t);
  }
}

namespace {

// The output memory from the entry's allocator. A failure fails this rank's op only: the rank
// still takes part in the collective (into `scratch`), so the others are not left waiting.
void* allocate_output(TensorEntry& e, const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& rows, size_t bytes, std::vector<char>* scratch) {
  std::string problem;
  void* out = nullptr;
  try {
    out = e.allocate(shape, rows);
    if (!out && bytes > 0) problem = "the output allocator returned null";
  } catch (const std::exception& ex) {
    problem = std::string("the output allocator threw: ") + ex.what();
  } catch (...) {
    problem = "the output allocator threw";
  }
  if (problem.empty()) return out;
  e.failed = std::make_shared<Status>(
      StatusCode::kInternal,
      "tensor '" + e.name + "': " + problem + " (output shape " + shape_string(shape) + ")");
  scratch->assign(std::max<size_t>(bytes, 1), 0);
  return scratch->data();
}

}  // namespace

void BucketExecutor::run_shaped(TensorEntry& e, const TensorSignature& signature, Stats& stats) {
  const int size = ctx_.size, me = ctx_.rank;
  const size_t element = dtype_size(e.signature.dtype);
  const std::vector<int64_t>& shape = e.signature.shape;
  size_t row_bytes = element;  // bytes of one row: the product of the dimensions after the first
  for (size_t d = 1; d < shape.size(); ++d) row_bytes *= static_cast<size_t>(shape[d]);
  std::vector<int64_t> rows(size);
  std::vector<size_t> send_bytes(size), recv_bytes(size);
  int64_t out_rows = 0;
  if (signature.collective == Collective::kAllgather) {
    rows = signature.extents;
  } else if (signature.collective == Collective::kAlltoall) {
    for (int r = 0; r < size; ++r) {
      rows[r] = signature.extents[static_cast<size_t>(r) * size + me];
      send_bytes[r] = static_cast<size_t>(e.signature.extents[r]) * row_bytes;
    }
  } else {
    for (int r = 0; r < size; ++r) rows[r] = shape[0] / size + (r < shape[0] % size ? 1 : 0);
  }
  for (int r = 0; r < size; ++r) recv_bytes[r] = static_cast<size_t>(rows[r]) * row_bytes;
  if (signature.collective == Collective::kReducescatter) {
    out_rows = rows[me];
  } else {
    for (int64_t n : rows) out_rows += n;
  }
  std::vector<int64_t> out_shape = shape;
  out_shape[0] = out_rows;
  const size_t out_bytes = static_cast<size_t>(out_rows) * row_bytes;
  std::vector<char> scratch;
  void* out = allocate_output(e, out_shape, rows, out_bytes, &scratch);

  const auto t = std::chrono::steady_clock::now();
  phases_.begin(collective_name(signature.collective), "communicate");
  if (signature.collective == Collective::kAllgather) {
    ctx_.comm->allgatherv(e.tensor.data, out, recv_bytes);
  } else if (signature.collective == Collective::kAlltoall) {
    ctx_.comm->alltoallv(e.tensor.data, send_bytes, out, recv_bytes);
  } else {
    // Reduced whole (the input is only read: a copy is reduced), then this rank's block kept.
    const size_t count = static_cast<size_t>(num_elements(shape));
    std::vector<char> work(static_cast<const char*>(e.tensor.data),
                           static_cast<const char*>(e.tensor.data) + count * element);
    const ScalarType type = reduce_scalar_type(e.signature.dtype);
    ctx_.comm->allreduce(work.data(), count, type, reduce_collective_op(signature.op));
    if (signature.op == ReduceOp::kAverage && size > 1) {
      scale(work.data(), count, type, 1.0 / size);
    }
    size_t offset = 0;
    for (int r = 0; r < me; ++r) offset += recv_bytes[r];
    if (out_bytes > 0) std::memcpy(out, work.data() + offset, out_bytes);
  }
  stats.communication_seconds += seconds_since(t);
}

void BucketExecutor::run_broadcast(const std::vector<TensorEntry*>& entries,
                                   const TensorSignature& signature, Stats& stats) {
  const auto t = std::chrono::steady_clock::now();
  phases_.begin("broadcast", "communicate");
  for (TensorEntry* e : entries) {
    const size_t bytes = e->signature.bytes();
    if (bytes > 0) ctx_.comm->broadcast(e->tensor.data, bytes, signature.root_rank);
  }
  stats.communication_seconds += seconds_since(t);
}

}  // namespace arcreduce
