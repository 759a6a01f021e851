#include "runtime/runtime.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compressors/registry.h"
#include "runtime/config_agreement.h"
#include "runtime/config_fields.h"
#include "runtime/device_executor.h"
#include "runtime/reduce_dtype.h"

namespace arcreduce {

Runtime::Runtime(const Config& config, std::unique_ptr<Communicator> comm) {
  std::string error;
  try {
    config.validate();
  } catch (const Error& e) {
    error = e.what();
  }
  agree_on_config(*comm, error.empty() ? &config : nullptr, error);
  ctx_.config = config;
  ctx_.rank = comm->rank();
  ctx_.size = comm->size();
  local_rank_ = comm->local_rank();
  local_size_ = comm->local_size();
  ctx_.comm = std::move(comm);
  ctx_.log = make_logger(ctx_.rank, config.log_level);
  ctx_.log->debug(
      "initialised: rank {} of {} (local {} of {}), fusion {} bytes, cycle {} ms, "
      "cache {} entries",
      ctx_.rank, ctx_.size, local_rank_, local_size_, config.fusion_threshold, config.cycle_time_ms,
      config.cache_capacity);
  device_query_ = make_cuda_device_query();
  coordinator_ = std::make_unique<Coordinator>(ctx_, queue_, state_);
  coordinator_->start();
}

Runtime::~Runtime() {
  shutdown();
  coordinator_.reset();
  ctx_.comm.reset();
}

void Runtime::shutdown() {
  if (coordinator_) coordinator_->shutdown();
}

void Runtime::request_shutdown() {
  if (coordinator_) coordinator_->request_shutdown();
}

void Runtime::save_state(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_.mutex());
  state_.write_back_mirror();  // error feedback of CUDA tensors, from device memory
  state_.save(path, ctx_.rank, ctx_.size);
}

void Runtime::load_state(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_.mutex());
  state_.load(path, ctx_.rank, ctx_.size);
}

Status Runtime::synchronize(Handle handle) {
  if (coordinator_->on_coordinator_thread() && !queue_.poll(handle)) {
    return Status(StatusCode::kInvalidArgument,
                  "synchronize() was called from a callback on the coordinator thread for an op "
                  "that has not completed; it would never return");
  }
  return queue_.synchronize(handle);
}

std::string Runtime::check_tensor(const std::string& name, const Tensor& tensor) const {
  const std::string who = "tensor '" + name + "' on rank " + std::to_string(ctx_.rank);
  if (name.empty())
    return "a tensor name must not be empty (rank " + std::to_string(ctx_.rank) + ")";
  if (name == kJoinName) return who + ": the name is reserved for join()";
  for (int64_t d : tensor.shape) {
    if (d < 0) return who + ": shape " + shape_string(tensor.shape) + " has a negative dimension";
  }
  if (static_cast<int>(tensor.dtype) < 0 ||
      static_cast<int>(tensor.dtype) > static_cast<int>(DType::kBool)) {
    return who + ": unknown dtype " + std::to_string(static_cast<int>(tensor.dtype));
  }
  // Every rank computes byte counts from the shape (the message parser refuses more than
  // INT64_MAX / 8 elements), so a product that overflows is refused here, naming the tensor.
  const int64_t n = num_elements(tensor.shape);
  if (n < 0 || n > std::numeric_limits<int64_t>::max() / 8 ||
      num_bytes(tensor.shape, tensor.dtype) < 0) {
    return who + ": shape " + shape_string(tensor.shape) + " of " + dtype_name(tensor.dtype) +
           " has more elements or bytes than a 64-bit count holds";
  }
  if (n > 0 && tensor.data == nullptr) return who + ": data is null but the shape has elements";
  if (tensor.device.kind == Device::kCUDA) {
    std::string problem = check_cuda_tensor(tensor, who, device_query_.get(), cuda_device_.load());
    if (!problem.empty()) return problem;
  } else if (tensor.device.kind != Device::kCPU) {
    return who + ": unknown device kind";
  }
  return "";
}

std::string Runtime::check_allreduce(const std::string& name, const Tensor& tensor,
                                     const AllreduceOptions& options) const {
  std::string problem = check_tensor(name, tensor);
  if (!problem.empty()) return problem;
  const std::string who = "tensor '" + name + "' on rank " + std::to_string(ctx_.rank);
  const int op = static_cast<int>(options.op);
  if (op < 0 || op > static_cast<int>(ReduceOp::kProduct)) {
    return who + ": unknown reduce op " + std::to_string(op);
  }
  const std::string op_name = reduce_op_name(options.op);
  if (tensor.dtype == DType::kBool &&
      (options.op == ReduceOp::kSum || options.op == ReduceOp::kAverage)) {
    return who + ": allreduce of bool takes min (and), max (or) or product (and), not " + op_name;
  }
  if (!is_floating_point(tensor.dtype) && options.op == ReduceOp::kAverage) {
    return who + ": the average of dtype " + dtype_name(tensor.dtype) +
           " is not exact; reduce with sum (and divide), or use a floating-point tensor";
  }
  const CompressionOptions& c = options.compression;
  if (!compressible(tensor.dtype, options.op)) {
    // Reduced exactly and densely, whatever the job's compressor: only an explicit request for
    // compression is an error.
    if (tensor.device.kind == Device::kCUDA) {
      return who +
             ": CUDA tensors are reduced by sum or average of floating-point dtypes only, "
             "not " +
             op_name + " of " + dtype_name(tensor.dtype);
    }
    const CompressorTraits* asked = c.compressor ? find_compressor(*c.compressor) : nullptr;
    if (c.compressor && !(asked && asked->native())) {  // "none" is no request for compression
      return who + ": compressor '" + *c.compressor + "' applies to sums and averages of " +
             "floating-point tensors; " + op_name + " of " + dtype_name(tensor.dtype) +
             " is reduced exactly, without compression";
    }
    return "";
  }
  if (c.compressor && !find_compressor(*c.compressor)) {
    return who + ": unknown compressor '" + *c.compressor + "'";
  }
  const std::string resolved = c.compressor.value_or(ctx_.config.compressor);
  const CompressorTraits* traits = find_compressor(resolved);
  if (!traits) return who + ": compressor '" + resolved + "' is not available in this build";
  if (c.ratio && !(*c.ratio > 0 && *c.ratio <= 1)) {
    return who + ": compression ratio " + std::to_string(*c.ratio) + " is not in (0, 1]";
  }
  const std::vector<std::string>& granularities = granularity_names();  // ARCREDUCE_GRANULARITY's
  if (c.granularity && std::find(granularities.begin(), granularities.end(), *c.granularity) ==
                           granularities.end()) {
    return who + ": unknown granularity '" + *c.granularity + "' (element or row)";
  }
  if (c.error_feedback) {
    if (!find_feedback(*c.error_feedback)) {
      return who + ": unknown error feedback '" + *c.error_feedback + "'";
    }
    // Dense reductions ignore error feedback, as they ignore the ratio (resolve()).
    if (!traits->dense && !traits->takes_feedback(*c.error_feedback)) {
      return who + ": error feedback '" + *c.error_feedback + "' cannot wrap " + resolved +
             (traits->keeps_own_residual ? ", which keeps its own residual"
                                         : ", which does not take it") +
             ": ask for 'none' or leave it unset";
    }
  }
  return "";
}

CompressionSpec Runtime::resolve_compression(const CompressionOptions& c, DType dtype,
                                             ReduceOp op) const {
  CompressionSpec spec;
  spec.compressor = c.compressor.value_or(ctx_.config.compressor);
  spec.ratio = c.ratio.value_or(ctx_.config.compress_ratio);
  spec.error_feedback = c.error_feedback.value_or(ctx_.config.error_feedback);
  // Reduced exactly and densely, whatever the job's compressor.
  if (!compressible(dtype, op)) return CompressionSpec{"none", 1.0, "", ""};
  // What does not apply to the compressor (its row, registry.h) takes a fixed value, so that it
  // neither splits buckets nor causes mismatch errors: the ratio is 1 where it does not size
  // what is sent (PowerSGD's rank does; dense reductions), the granularity empty where it has
  // none, and the error feedback "none" where it may not wrap the compressor (the job-wide
  // ARCREDUCE_ERROR_FEEDBACK does not apply to Ok-Topk and PowerSGD; dense reductions ignore it).
  // check_allreduce() has refused unknown compressors.
  if (const CompressorTraits* traits = find_compressor(spec.compressor)) {
    if (traits->uses_granularity)
      spec.granularity = c.granularity.value_or(ctx_.config.granularity);
    if (!traits->uses_ratio) spec.ratio = 1.0;
    if (!traits->takes_feedback(spec.error_feedback)) spec.error_feedback = "none";
  }
  return spec;
}

TensorSignature Runtime::resolve(const Tensor& tensor, const AllreduceOptions& options) const {
  TensorSignature s;
  s.dtype = tensor.dtype;
  s.shape = tensor.shape;
  s.device = tensor.device.kind;
  s.op = options.op;
  s.compression = resolve_compression(options.compression, tensor.dtype, options.op);
  // ARCREDUCE_AUTO_COMPRESS manages CPU tensors compressed as the job's configuration says: its
  // compressor, ratio and granularity (their options chose no others; bindings that pass the
  // job's values explicitly count), where that compressor sends less than the whole tensor
  // (runtime/compression_choice.h). The error feedback may differ: a binding pairs it with the
  // optimizer (ef14 for SGD without momentum), and every feedback has a dense step.
  const CompressorTraits* traits = find_compressor(s.compression.compressor);
  if (ctx_.config.auto_compress && s.device == Device::kCPU && traits && !traits->dense) {
    const CompressionSpec job = resolve_compression(CompressionOptions{}, tensor.dtype, options.op);
    s.compression.automatic = s.compression.compressor == job.compressor &&
                              s.compression.ratio == job.ratio &&
                              s.compression.granularity == job.granularity;
  }
  return s;
}

Handle Runtime::allreduce_async(const std::string& name, const Tensor& tensor,
                                const AllreduceOptions& options) {
  std::string problem = check_allreduce(name, tensor, options);
  if (!problem.empty()) return refuse(name, problem, Collective::kAllreduce, options.callback);
  TensorEntry entry;
  if (tensor.device.kind == Device::kCUDA) {
    const std::string who = "tensor '" + name + "' on rank " + std::to_string(ctx_.rank);
    int expected = -1;
    if (!cuda_device_.compare_exchange_strong(expected, tensor.device.index) &&
        expected != tensor.device.index) {
      problem = check_cuda_tensor(tensor, who, device_query_.get(), expected);
      return refuse(name, problem, Collective::kAllreduce, options.callback);
    }
    if (!tensor.ready_event && num_elements(tensor.shape) > 0) {
      try {
        entry.device_ready = record_default_stream(tensor.device.index);
      } catch (const Error& e) {
        return refuse(name, who + ": " + e.what(), Collective::kAllreduce, options.callback);
      }
    }
  }
  entry.name = name;
  entry.tensor = tensor;
  entry.signature = resolve(tensor, options);
  entry.callback = options.callback;
  entry.submitted = Clock::now();
  return queue_.submit(std::move(entry));
}

TensorEntry Runtime::uncompressed_entry(const std::string& name, const Tensor& tensor,
                                        Collective collective,
                                        const std::function<void(const Status&)>& callback) {
  TensorEntry entry;
  entry.name = name;
  entry.tensor = tensor;
  entry.signature.dtype = tensor.dtype;
  entry.signature.shape = tensor.shape;
  entry.signature.device = tensor.device.kind;
  entry.signature.compression = CompressionSpec{"none", 1.0, "none", ""};
  entry.signature.collective = collective;
  entry.callback = callback;
  entry.submitted = Clock::now();
  return entry;
}

Handle Runtime::broadcast_async(const std::string& name, const Tensor& tensor, int root_rank,
                                const BroadcastOptions& options) {
  std::string problem = check_tensor(name, tensor);
  if (problem.empty() && tensor.device.kind == Device::kCUDA) {
    problem = "tensor '" + name + "' on rank " + std::to_string(ctx_.rank) +
              ": broadcast of CUDA tensors is not supported yet (docs/cuda.md)";
  }
  if (!problem.empty()) return refuse(name, problem, Collective::kBroadcast, options.callback);
  // root_rank is checked during negotiation (MessageTable::validate), so that a bad value on some
  // ranks fails the op on every rank instead of leaving the others waiting.
  TensorEntry entry = uncompressed_entry(name, tensor, Collective::kBroadcast, options.callback);
  entry.signature.root_rank = root_rank;
  return queue_.submit(std::move(entry));
}

Handle Runtime::refuse(const std::string& name, const std::string& reason, Collective collective,
                       const std::function<void(const Status&)>& callback) {
  TensorSignature signature;
  signature.collective = collective;
  return queue_.refuse(name, signature, callback, Status(StatusCode::kInvalidArgument, reason));
}

std::string Runtime::check_shaped(const std::string& name, const Tensor& tensor,
                                  const CollectiveOptions& options, Collective collective) const {
  std::string problem = check_tensor(name, tensor);
  if (!problem.empty()) return problem;
  const std::string who = "tensor '" + name + "' on rank " + std::to_string(ctx_.rank);
  const std::string what = collective_name(collective);
  if (tensor.device.kind != Device::kCPU) {
    return who + ": " + what + " of CUDA tensors is not supported yet (docs/cuda.md)";
  }
  if (!options.allocate) return who + ": " + what + " needs an output allocator";
  if (tensor.shape.empty()) {
    return who + ": " + what + " works along the first dimension; a scalar has none";
  }
  if (collective == Collective::kReducescatter) {
    AllreduceOptions reduction;
    reduction.op = options.op;
    reduction.compression.compressor = "none";
    return check_allreduce(name, tensor, reduction);
  }
  if (collective == Collective::kAlltoall && !options.splits.empty()) {
    if (static_cast<int>(options.splits.size()) != ctx_.size) {
      return who + ": alltoall takes one split per rank (" + std::to_string(ctx_.size) + "), not " +
             std::to_string(options.splits.size());
    }
    int64_t total = 0;
    for (int64_t s : options.splits) {
      if (s < 0) return who + ": alltoall split " + std::to_string(s) + " is negative";
      total += s;
    }
    if (total != tensor.shape[0]) {
      return who + ": alltoall splits sum to " + std::to_string(total) +
             ", not the first dimension " + std::to_string(tensor.shape[0]);
    }
  } else if (collective == Collective::kAlltoall && tensor.shape[0] % ctx_.size != 0) {
    return who + ": alltoall without splits needs a first dimension divisible by the " +
           std::to_string(ctx_.size) + " ranks, not " + std::to_string(tensor.shape[0]);
  }
  return "";
}

Handle Runtime::shaped_async(const std::string& name, const Tensor& tensor,
                             const CollectiveOptions& options, Collective collective) {
  const std::string problem = check_shaped(name, tensor, options, collective);
  if (!problem.empty()) return refuse(name, problem, collective, options.callback);
  TensorEntry entry = uncompressed_entry(name, tensor, collective, options.callback);
  entry.signature.op = collective == Collective::kReducescatter ? options.op : ReduceOp::kSum;
  if (collective == Collective::kAlltoall) {
    entry.signature.extents = options.splits;
    if (entry.signature.extents.empty()) {
      entry.signature.extents.assign(ctx_.size, tensor.shape[0] / ctx_.size);
    }
  }
  entry.allocate = options.allocate;
  return queue_.submit(std::move(entry));
}

int Runtime::join() {
  TensorEntry entry;
  entry.name = kJoinName;
  entry.signature.compression = CompressionSpec{"none", 1.0, "none", ""};
  entry.signature.collective = Collective::kJoin;
  entry.submitted = Clock::now();
  const Status status = synchronize(queue_.submit(std::move(entry)));
  if (!status.ok()) throw Error("join(): " + status.message(), status.code());
  return coordinator_->last_joined();
}

}  // namespace arcreduce
