// The CUDA device path (docs/cuda.md): per device one runtime-owned stream, a device fusion
// buffer, a device workspace and a pinned staging buffer. Dense buckets are packed on the device
// (batched copies), reduced by a CUDA-aware MPI in device memory or staged through pinned memory
// chunk by chunk, and unpacked with the average's scaling. ARC-Top-K buckets are compressed on
// the device (arctopk_device_feedback.h, error feedback in device memory): only the sketch and
// the packed rows are reduced, staged when MPI cannot take device memory. Other compressors run
// on host copies of the bucket.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "compressors/arctopk_device_feedback.h"
#include "compressors/kernels/arc_plan_cuda.h"
#include "compressors/kernels/kernels.h"
#include "compressors/kernels/kernels_cuda.h"
#include "compressors/registry.h"
#include "compressors/selection_check.h"
#include "ops/copy_batch.h"
#include "ops/cuda/copy_batch_cuda.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_handles.h"
#include "ops/cuda/nccl_communicator.h"
#include "ops/mpi_communicator.h"
#include "ops/mpi_cuda_support.h"
#include "ops/staging_chunks.h"
#include "ops/traffic_estimates.h"
#include "runtime/compressor_config.h"
#include "runtime/cuda/device_feedback_store.h"
#include "runtime/device_executor.h"
#include "runtime/reduce_dtype.h"

namespace arcreduce {
namespace {

using cuda::DeviceGuard;
using cuda::Event;

// Staging granularity: the copy of chunk c + 1 off the device overlaps the collective of chunk c.
// Not measured on a GPU yet (docs/cuda.md).
constexpr size_t kStagingChunkBytes = size_t{4} << 20;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The bucket's completion event; a bucket that went through NCCL also asks NCCL whether its
// collectives failed asynchronously once the event is reached (a failed NCCL kernel can end
// without a CUDA error).
class EventCompletion : public DeviceCompletion {
 public:
  EventCompletion(int device, cudaStream_t stream, cuda::NcclCommunicator* nccl)
      : device_(device), nccl_(nccl) {
    DeviceGuard guard(device_);
    event_.record(stream);
  }
  bool ready() override {
    DeviceGuard guard(device_);
    if (!event_.ready()) return false;
    if (nccl_) nccl_->check_async();
    return true;
  }
  void wait() override {
    DeviceGuard guard(device_);
    event_.synchronize();
    if (nccl_) nccl_->check_async();
  }

 private:
  int device_;
  cuda::NcclCommunicator* nccl_;  // owned by the executor's DeviceState, which outlives this
  Event event_;
};

struct DeviceState {
  explicit DeviceState(int device) : stream(device) {}
  cuda::Stream stream;
  std::unique_ptr<cuda::NcclCommunicator> nccl;  // created by the first bucket NCCL reduces
  cuda::DeviceMemory fusion;
  cuda::DeviceMemory workspace;  // compressed buckets: fp32 copies, EF scratch, plan buffers
  cuda::DeviceMemory rows;       // compressed buckets: selected row indices
  cuda::PinnedMemory staging;
  std::vector<std::unique_ptr<Event>> chunk_events;
};

class CudaDeviceExecutor : public DeviceExecutor {
 public:
  CudaDeviceExecutor(Context& ctx, StateStore& state)
      : ctx_(ctx), state_(state), options_(compressor_options(ctx.config)) {
    std::lock_guard<std::mutex> lock(state_.mutex());
    state_.set_mirror(&feedback_);
  }
  ~CudaDeviceExecutor() override {
    std::lock_guard<std::mutex> lock(state_.mutex());
    state_.set_mirror(nullptr);
  }

  std::unique_ptr<DeviceCompletion> run(const std::vector<TensorEntry*>& entries,
                                        const TensorSignature& signature, Stats& stats,
                                        CompressorStats& cstats, PhaseLog& phases,
                                        const HostPath& host_path) override {
    const int device = entries.front()->tensor.device.index;
    for (const TensorEntry* e : entries) {
      if (e->tensor.device.index != device) {
        throw Error("bucket mixes CUDA devices " + std::to_string(device) + " and " +
                        std::to_string(e->tensor.device.index) + " (tensor '" + e->name + "')",
                    StatusCode::kInternal);
      }
    }
    DeviceGuard guard(device);
    DeviceState& d = state(device);
    phases_ = &phases;
    used_nccl_ = false;
    wait_for_producers(entries, d.stream.get());
    const CompressorTraits* traits = find_compressor(signature.compression.compressor);
    switch (traits ? traits->cuda : CudaPath::kHostCopies) {
      case CudaPath::kDense:
        run_dense(entries, signature, d, stats, cstats);
        break;
      case CudaPath::kArcTopK:
        run_compressed(entries, signature, device, d, stats, cstats);
        break;
      case CudaPath::kHostCopies:
        run_on_host(entries, d, stats, host_path);
        break;
    }
    return std::make_unique<EventCompletion>(device, d.stream.get(),
                                             used_nccl_ ? d.nccl.get() : nullptr);
  }

 private:
  DeviceState& state(int device) {
    auto it = devices_.find(device);
    if (it == devices_.end()) {
      it = devices_.emplace(device, std::make_unique<DeviceState>(device)).first;
      std::string mpi, fp32;
      choose_device_transport(mpi_cuda_support_compiled(), mpi_cuda_support_runtime(), &mpi);
      choose_cuda_transport(ctx_.config.cuda_transport, cuda::nccl_compiled(),
                            dynamic_cast<MpiCommunicator*>(ctx_.comm.get()) != nullptr,
                            ctx_.comm->allreduce_accepts_device_memory(ScalarType::kFloat32, 1),
                            ScalarType::kFloat32, &fp32);
      ctx_.log->info("CUDA device {}: runtime stream created; {}; fp32 sums: {}", device, mpi,
                     fp32);
    }
    return *it->second;
  }

  // The runtime stream waits for each tensor's producer: the framework's ready_event, else the
  // default-stream event recorded at submission. The framework's stream is never used.
  static void wait_for_producers(const std::vector<TensorEntry*>& entries, cudaStream_t stream) {
    for (const TensorEntry* e : entries) {
      auto event = static_cast<cudaEvent_t>(e->tensor.ready_event ? e->tensor.ready_event
                                                                  : e->device_ready.get());
      if (event) ARC_CUDA_CHECK(cudaStreamWaitEvent(stream, event, 0));
    }
  }

  static void launch(const std::vector<CopySpan>& spans, ScalarType type, bool scaled,
                     double factor, cudaStream_t stream) {
    for (const CopyBatch& batch : plan_copy_batches(spans, cuda::kCopyBlockElements)) {
      cuda::launch_copy_batch(batch, type, scaled, factor, stream);
    }
  }

  Event& chunk_event(DeviceState& d, size_t i) {
    while (d.chunk_events.size() <= i) d.chunk_events.push_back(std::make_unique<Event>());
    return *d.chunk_events[i];
  }

  void run_dense(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
                 DeviceState& d, Stats& stats, CompressorStats& cstats) {
    const ScalarType type = reduce_scalar_type(signature.dtype);
    const size_t element = scalar_size(type);
    size_t count = 0;
    for (const TensorEntry* e : entries) count += static_cast<size_t>(e->signature.elements());
    if (count == 0) return;
    const bool average = signature.op == ReduceOp::kAverage && ctx_.size > 1;
    const double inv_size = 1.0 / ctx_.size;
    const cudaStream_t stream = d.stream.get();

    auto t = std::chrono::steady_clock::now();
    phases_->begin("pack", "fuse");
    if (count * element > d.fusion.capacity()) d.stream.synchronize();
    auto* fused = static_cast<uint8_t*>(d.fusion.reserve(count * element));
    std::vector<CopySpan> pack, unpack;
    size_t offset = 0;
    for (const TensorEntry* e : entries) {
      const auto n = static_cast<int64_t>(e->signature.elements());
      pack.push_back({e->tensor.data, fused + offset, n});
      unpack.push_back({fused + offset, e->tensor.data, n});
      offset += static_cast<size_t>(n) * element;
    }
    // fp16/bf16 averages pre-scale by 1/N so partial sums stay in range (as the CPU path).
    launch(pack, type, average && scales_before_sum(signature.dtype), inv_size, stream);
    stats.copy_seconds += seconds_since(t);

    t = std::chrono::steady_clock::now();
    phases_->begin("values collective", "communicate");
    const TrafficCounters before = traffic();
    allreduce_device(d, fused, count, type);
    const TrafficCounters after = traffic();
    cstats.bytes_sent += after.bytes_sent - before.bytes_sent;
    cstats.bytes_received += after.bytes_received - before.bytes_received;
    stats.communication_seconds += seconds_since(t);

    t = std::chrono::steady_clock::now();
    phases_->begin("unpack", "decompress");
    launch(unpack, type, average && !scales_before_sum(signature.dtype), inv_size, stream);
    stats.copy_seconds += seconds_since(t);
  }

  // Sums `count` values of device memory in place across ranks, by the transport
  // ARCREDUCE_CUDA_TRANSPORT picks (the same on every rank): NCCL enqueued on the runtime stream,
  // MPI on the device pointer when it is CUDA-aware for this type, else staged through pinned
  // memory. The NCCL communicator is created by the first call that needs it: buckets run in
  // the negotiated order, so every rank creates it at the same point.
  void allreduce_device(DeviceState& d, void* data, size_t count, ScalarType type) {
    if (count == 0) return;
    const DeviceTransport transport =
        choose_cuda_transport(ctx_.config.cuda_transport, cuda::nccl_compiled(),
                              dynamic_cast<MpiCommunicator*>(ctx_.comm.get()) != nullptr,
                              ctx_.comm->allreduce_accepts_device_memory(type, count), type);
    if (transport == DeviceTransport::kNccl) {
      if (!d.nccl) {
        d.nccl = cuda::NcclCommunicator::create(*ctx_.comm, d.stream.device());
        ctx_.log->info("CUDA device {}: NCCL communicator of {} ranks created", d.stream.device(),
                       d.nccl->size());
      }
      d.nccl->allreduce(data, count, type, d.stream.get());
      used_nccl_ = true;
      // NCCL's bytes never reach the communicator's counters: its ring's, estimated.
      const TrafficCounters t = allreduce_traffic(count, scalar_size(type), ctx_.size, ctx_.rank);
      nccl_traffic_.bytes_sent += t.bytes_sent;
      nccl_traffic_.bytes_received += t.bytes_received;
    } else if (transport == DeviceTransport::kCudaAwareMpi) {
      d.stream.synchronize();  // MPI knows no streams: the buffer must be complete
      ctx_.comm->allreduce(data, count, type, CollectiveOp::kSum);
    } else {
      reduce_staged(d, static_cast<uint8_t*>(data), count, type);
    }
  }

  // The communicator's traffic plus NCCL's estimate: bucket statistics take differences of it.
  TrafficCounters traffic() const {
    TrafficCounters t = ctx_.comm->traffic();
    t.bytes_sent += nccl_traffic_.bytes_sent;
    t.bytes_received += nccl_traffic_.bytes_received;
    return t;
  }

  // All chunks' device-to-host copies are queued at once, each followed by an event; chunk c is
  // reduced as soon as its copy is done and copied back while chunk c + 1 is reduced.
  void reduce_staged(DeviceState& d, uint8_t* fused, size_t count, ScalarType type) {
    const size_t element = scalar_size(type);
    const size_t bytes = count * element;
    const cudaStream_t stream = d.stream.get();
    if (bytes > d.staging.capacity()) d.stream.synchronize();
    auto* host = static_cast<uint8_t*>(d.staging.reserve(bytes));
    const std::vector<StagingChunk> chunks =
        plan_staging_chunks(bytes, element, kStagingChunkBytes);
    for (size_t c = 0; c < chunks.size(); ++c) {
      ARC_CUDA_CHECK(cudaMemcpyAsync(host + chunks[c].offset, fused + chunks[c].offset,
                                     chunks[c].bytes, cudaMemcpyDeviceToHost, stream));
      chunk_event(d, c).record(stream);
    }
    for (size_t c = 0; c < chunks.size(); ++c) {
      chunk_event(d, c).synchronize();
      ctx_.comm->allreduce(host + chunks[c].offset, chunks[c].bytes / element, type,
                           CollectiveOp::kSum);
      ARC_CUDA_CHECK(cudaMemcpyAsync(fused + chunks[c].offset, host + chunks[c].offset,
                                     chunks[c].bytes, cudaMemcpyHostToDevice, stream));
    }
  }

  // ARC-Top-K buckets, as BucketExecutor::run_host on the device: tensors still in their warm-up
  // steps take the dense path, the others the device pipeline. The state mutex is held
  // throughout, so save_state/load_state see the device buffers between buckets only.
  void run_compressed(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
                      int device, DeviceState& d, Stats& stats, CompressorStats& cstats) {
    std::lock_guard<std::mutex> lock(state_.mutex());
    // efm carries the optimizer's momentum, which a plain dense warm-up would drop: the device
    // pipeline runs its warm-up itself (arctopk_device_feedback.h), as ErrorFeedback does.
    const FeedbackRow* feedback = find_feedback(signature.compression.error_feedback);
    const bool feedback_warms_up = feedback && feedback->does_own_warmup;
    const WarmupSplit split =
        split_warmup(entries, state_, feedback_warms_up ? 0 : ctx_.config.warmup_steps);
    if (!split.warmup.empty()) {
      cstats.warmup_tensors += split.warmup.size();
      run_dense(split.warmup, signature, d, stats, cstats);
    }
    if (!split.compressed.empty()) {
      run_arctopk(split.compressed, signature, device, d, stats, cstats);
    }
  }

  void run_arctopk(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
                   int device, DeviceState& d, Stats& stats, CompressorStats& cstats) {
    auto t = std::chrono::steady_clock::now();
    phases_->begin("fuse", "fuse");
    const cudaStream_t stream = d.stream.get();
    const bool fp32 = signature.dtype == DType::kFloat32;
    const FeedbackKind kind = feedback_kind(signature.compression.error_feedback);
    const FeedbackBuffers need = feedback_buffers(kind);
    std::vector<ArcFeedbackTensor> bucket(entries.size());
    std::vector<size_t> cast_at(entries.size(), 0);
    size_t cast_floats = 0;  // fp32 working copies of the other dtypes
    for (size_t i = 0; i < entries.size(); ++i) {
      const TensorEntry& e = *entries[i];
      ArcFeedbackTensor& c = bucket[i];
      c.name = e.name;
      c.shape = e.signature.shape;
      c.elements = static_cast<size_t>(e.signature.elements());
      const TensorState& s = state_.get(c.name, c.elements);
      c.step = s.compressed_steps;
      // A state that another kind started may lack what this one continues from: start over.
      c.started = s.ef_started && continues_state(kind, feedback_.held(c.name, c.elements, s));
      if (!fp32) {
        cast_at[i] = cast_floats;
        cast_floats += c.elements;
      }
    }
    const ArcFeedbackPlan p = plan_arc_feedback(bucket, options_, signature.compression, ctx_.size);
    const ArcTopKPlan& plan = p.plan;
    const size_t floats = cast_floats + p.work_floats + p.warm_floats + plan.first_floats +
                          plan.second_floats + plan.scratch_floats;
    const size_t float_bytes = std::max<size_t>(floats * sizeof(float), 1);
    const size_t row_bytes = std::max<size_t>(plan.row_count * sizeof(int64_t), 1);
    // Growth drops the old memory: the previous bucket's queued work may still read it.
    if (float_bytes > d.workspace.capacity() || row_bytes > d.rows.capacity()) {
      d.stream.synchronize();
    }
    float* cast = static_cast<float*>(d.workspace.reserve(float_bytes));
    auto* rows = static_cast<int64_t*>(d.rows.reserve(row_bytes));
    float* work = cast + cast_floats;
    float* warm = work + p.work_floats;
    ArcTopKPlanBuffers buf;
    buf.first = warm + p.warm_floats;
    buf.second = buf.first + plan.first_floats;
    buf.scratch = buf.second + plan.second_floats;
    buf.rows = rows;
    for (size_t i = 0; i < entries.size(); ++i) {
      const TensorEntry& e = *entries[i];
      ArcFeedbackTensor& c = bucket[i];
      feedback_.bind(c, need, device, stream, state_.get(c.name, c.elements));
      if (fp32) {
        c.input = c.output = static_cast<float*>(e.tensor.data);  // every kind reads g first
      } else {
        c.input = c.output = cast + cast_at[i];
        kernels::cuda::to_float(e.tensor.data, e.signature.dtype, c.output, c.elements, stream);
      }
    }
    stats.copy_seconds += seconds_since(t);

    t = std::chrono::steady_clock::now();
    phases_->begin("compress", "compress");
    const TrafficCounters before = traffic();
    CudaArcKernels k;
    k.stream = stream;
    run_arc_feedback(k, p, bucket, work, warm, buf, [&](float* data, size_t n) {
      phases_->begin("collective", "communicate");
      allreduce_device(d, data, n, ScalarType::kFloat32);
      phases_->begin("compress", "compress");
    });
    if (ctx_.config.check_consistency) check_selection(p, bucket, rows, d);
    const TrafficCounters after = traffic();
    cstats.bytes_sent += after.bytes_sent - before.bytes_sent;
    cstats.bytes_received += after.bytes_received - before.bytes_received;
    cstats.sketch_bytes += plan.sketch_bytes;
    cstats.value_bytes += plan.value_bytes;
    cstats.selected_rows += plan.selected_rows;
    cstats.dense_fallbacks += plan.dense_fallbacks;
    if (kind == FeedbackKind::kEfm) cstats.warmup_tensors += p.warm.size();
    stats.compression_seconds += seconds_since(t);

    t = std::chrono::steady_clock::now();
    phases_->begin("unpack", "decompress");
    const bool feedback = p.kind != FeedbackKind::kNone;
    for (size_t i = 0; i < entries.size(); ++i) {
      TensorEntry& e = *entries[i];
      const ArcFeedbackTensor& c = bucket[i];
      if (signature.op == ReduceOp::kSum) {
        kernels::cuda::scale(c.output, c.elements, static_cast<float>(ctx_.size), stream);
      }
      if (!fp32) {
        kernels::cuda::from_float(c.output, e.signature.dtype, e.tensor.data, c.elements, stream);
      }
      TensorState& s = state_.get(c.name, c.elements);
      ++s.compressed_steps;
      if (feedback) s.ef_started = true;
      if (kind == FeedbackKind::kEfm) feedback_.drop_estimates(c.name, s);
    }
    stats.copy_seconds += seconds_since(t);
  }

  // ARCREDUCE_CHECK_CONSISTENCY: the selected rows, hashed on the host, compared across ranks.
  void check_selection(const ArcFeedbackPlan& p, const std::vector<ArcFeedbackTensor>& bucket,
                       const int64_t* rows, DeviceState& d) {
    std::vector<int64_t> host(p.plan.row_count);
    if (!host.empty()) {
      ARC_CUDA_CHECK(cudaMemcpyAsync(host.data(), rows, host.size() * sizeof(int64_t),
                                     cudaMemcpyDeviceToHost, d.stream.get()));
    }
    d.stream.synchronize();
    std::vector<std::string> names;
    std::vector<uint64_t> hashes;
    for (size_t j = 0; j < p.compressed.size(); ++j) {
      const ArcTopKPlan::Item& it = p.plan.items[j];
      if (it.path == ArcTopKPlan::Path::kDense) continue;
      names.push_back(bucket[p.compressed[j]].name);
      hashes.push_back(kernels::hash_indices(host.data() + it.rows, it.k));
    }
    check_same_selection(*ctx_.comm, names, hashes);
  }

  // Other compressors: the tensors cross to pinned host memory, the CPU executor reduces them
  // there (same kernels and state as CPU tensors), and the results go back.
  void run_on_host(const std::vector<TensorEntry*>& entries, DeviceState& d, Stats& stats,
                   const HostPath& host_path) {
    auto t = std::chrono::steady_clock::now();
    phases_->begin("copy to host", "fuse");
    size_t bytes = 0;
    for (const TensorEntry* e : entries) {
      bytes += static_cast<size_t>(e->signature.elements()) * dtype_size(e->signature.dtype);
    }
    if (bytes > d.staging.capacity()) d.stream.synchronize();
    auto* host = static_cast<uint8_t*>(d.staging.reserve(std::max<size_t>(bytes, 1)));
    const cudaStream_t stream = d.stream.get();
    std::vector<TensorEntry> shadows(entries.size());
    std::vector<TensorEntry*> shadow_ptrs;
    size_t offset = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const TensorEntry& e = *entries[i];
      const size_t n = static_cast<size_t>(e.signature.elements()) * dtype_size(e.signature.dtype);
      if (n > 0) {
        ARC_CUDA_CHECK(
            cudaMemcpyAsync(host + offset, e.tensor.data, n, cudaMemcpyDeviceToHost, stream));
      }
      shadows[i].name = e.name;
      shadows[i].signature = e.signature;
      shadows[i].tensor = Tensor{n > 0 ? host + offset : nullptr, e.tensor.dtype, e.tensor.shape};
      shadow_ptrs.push_back(&shadows[i]);
      offset += n;
    }
    d.stream.synchronize();
    stats.copy_seconds += seconds_since(t);
    host_path(shadow_ptrs);
    t = std::chrono::steady_clock::now();
    phases_->begin("copy to device", "decompress");
    for (size_t i = 0; i < entries.size(); ++i) {
      const size_t n = static_cast<size_t>(entries[i]->signature.elements()) *
                       dtype_size(entries[i]->signature.dtype);
      if (n == 0) continue;
      ARC_CUDA_CHECK(cudaMemcpyAsync(entries[i]->tensor.data, shadows[i].tensor.data, n,
                                     cudaMemcpyHostToDevice, stream));
    }
    stats.copy_seconds += seconds_since(t);
  }

  Context& ctx_;
  StateStore& state_;
  const CompressorOptions options_;  // of ctx_.config, for the device pipeline
  DeviceFeedbackStore feedback_;     // error feedback of CUDA tensors, mirrored into state_
  PhaseLog* phases_ = nullptr;       // of the current run()
  bool used_nccl_ = false;           // the current run() enqueued NCCL collectives
  TrafficCounters nccl_traffic_;     // estimated: NCCL's bytes never reach the communicator
  std::map<int, std::unique_ptr<DeviceState>> devices_;
};

}  // namespace

std::unique_ptr<DeviceExecutor> make_device_executor(Context& ctx, StateStore& state) {
  return std::make_unique<CudaDeviceExecutor>(ctx, state);
}

std::shared_ptr<void> record_default_stream(int device) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  ARC_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  std::shared_ptr<void> owned(event,
                              [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  ARC_CUDA_CHECK(cudaEventRecord(event, cudaStreamLegacy));
  return owned;
}

}  // namespace arcreduce
