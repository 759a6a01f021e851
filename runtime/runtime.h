// Runtime: one arcreduce instance over one communicator — context, tensor queue and coordinator.
// The process-wide API (arcreduce.h) owns one Runtime over MPI; tests create several over a
// loopback world, one per thread-rank. Construction is collective over the communicator.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "arcreduce/arcreduce.h"
#include "ops/device_query.h"
#include "runtime/context.h"
#include "runtime/coordinator.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class Runtime {
 public:
  // Validates `config` and agrees on it with every rank (throws Error on all ranks otherwise),
  // then starts the coordinator thread, which owns `comm` from then on.
  Runtime(const Config& config, std::unique_ptr<Communicator> comm);
  ~Runtime();  // shutdown(), then releases the communicator
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  Handle allreduce_async(const std::string& name, const Tensor& tensor,
                         const AllreduceOptions& options);
  Handle broadcast_async(const std::string& name, const Tensor& tensor, int root_rank,
                         const BroadcastOptions& options);
  // Blocks until every rank has joined; returns the rank that joined last (arcreduce::join).
  int join();
  // allgather_async, alltoall_async and reducescatter_async (`collective` says which).
  Handle shaped_async(const std::string& name, const Tensor& tensor,
                      const CollectiveOptions& options, Collective collective);
  // Refuses `name` on this rank and tells the others (TensorQueue::refuse): the handle fails at
  // once with kInvalidArgument, and every other rank's op of `name` fails with `reason`.
  Handle refuse(const std::string& name, const std::string& reason, Collective collective,
                const std::function<void(const Status&)>& callback = nullptr);
  bool poll(Handle handle) const { return queue_.poll(handle); }
  Status synchronize(Handle handle);
  // Agrees on shutdown with every rank and waits for this runtime's coordinator; from one of its
  // callbacks, or through request_shutdown(), only asks and returns.
  void shutdown();
  void request_shutdown();
  bool running() const { return !queue_.closed(); }
  Stats stats() const { return coordinator_->stats(); }
  // Compressor state of this rank (error feedback, step counters); throw Error on failure.
  void save_state(const std::string& path);
  void load_state(const std::string& path);

  int rank() const { return ctx_.rank; }
  int size() const { return ctx_.size; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const Config& config() const { return ctx_.config; }

 private:
  // Empty when valid, else the reason naming the tensor (checks that apply to every collective).
  std::string check_tensor(const std::string& name, const Tensor& tensor) const;
  // An entry of a collective that is never compressed (broadcast, allgather, ...).
  TensorEntry uncompressed_entry(const std::string& name, const Tensor& tensor,
                                 Collective collective,
                                 const std::function<void(const Status&)>& callback);
  std::string check_shaped(const std::string& name, const Tensor& tensor,
                           const CollectiveOptions& options, Collective collective) const;
  std::string check_allreduce(const std::string& name, const Tensor& tensor,
                              const AllreduceOptions& options) const;
  TensorSignature resolve(const Tensor& tensor, const AllreduceOptions& options) const;
  // The compression of a tensor with these options: unset fields from the configuration, those
  // that do not apply to the compressor fixed; automatic left false.
  CompressionSpec resolve_compression(const CompressionOptions& options, DType dtype,
                                      ReduceOp op) const;

  Context ctx_;
  std::unique_ptr<DeviceQuery> device_query_;  // null without CUDA
  std::atomic<int> cuda_device_{-1};           // the GPU of this process's CUDA tensors
  int local_rank_ = 0;
  int local_size_ = 1;
  TensorQueue queue_;
  StateStore state_;
  std::unique_ptr<Coordinator> coordinator_;
};

}  // namespace arcreduce
