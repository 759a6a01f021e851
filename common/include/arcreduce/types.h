// Value types of the public API: tensors, devices, reduction options.
// Tensor, CompressionOptions and AllreduceOptions are aggregates on purpose: bindings build
// them with brace initialisation (`Tensor{ptr, DType::kFloat32, {rows, cols}}`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace arcreduce {

class Status;

// Floating-point dtypes go through every collective. The integer dtypes (appended so the first
// four keep their values) are reduced where the result is exact (sum, min, max, product; sums
// and products wrap around), bool by min (and), max (or) and product (and).
enum class DType {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kBool,
};
// kAverage is the sum divided by the number of ranks. Compression applies to kSum and kAverage of
// floating-point tensors only; the other ops, and integer dtypes, are reduced densely and exactly.
enum class ReduceOp { kSum, kAverage, kMin, kMax, kProduct };

struct Device {
  enum Kind { kCPU, kCUDA } kind = kCPU;
  int index = 0;
};

// Non-owning view of a dense row-major tensor. The memory must stay valid and untouched by the
// caller from submission until the op completes (callback fired / synchronize returned).
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // row-major; rows = shape[0] for 2-D; {} is a scalar
  Device device;
  void* ready_event = nullptr;  // CUDA: cudaEvent_t the data is ready after (optional)
};

// Unset fields fall back to the runtime's Config (ARCREDUCE_* variables).
struct CompressionOptions {
  std::optional<std::string> compressor;      // none, fp16, topk, randk, arctopk, oktopk, powersgd
  std::optional<double> ratio;                // fraction of entries kept, 0 < ratio <= 1
  std::optional<std::string> error_feedback;  // none, ef14, ef21, ef21m
  std::optional<std::string> granularity;     // topk/randk selection unit: element, row
};

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kAverage;
  CompressionOptions compression;
  // Fired exactly once on the coordinator thread when the op completes (result or error).
  // Exceptions thrown by it are caught and logged. It must not call synchronize().
  std::function<void(const Status&)> callback;
  // The ranks that take part (add_process_set()); 0, the default, is every rank of the job.
  int process_set = 0;
};

// Options of broadcast_async(); an aggregate like AllreduceOptions.
struct BroadcastOptions {
  // Fired exactly once on the coordinator thread when the op completes (result or error).
  // Exceptions thrown by it are caught and logged. It must not call synchronize().
  std::function<void(const Status&)> callback;
  // The ranks that take part (add_process_set()); root_rank stays a rank of the job.
  int process_set = 0;
};

// Memory for the output of an op whose shape is known only once every rank has submitted
// (allgather, alltoall, reducescatter). Called once, on the coordinator thread, with the output's
// shape and, per rank, the output rows (first dimension) that come from that rank (allgather,
// alltoall) or that it receives (reducescatter). Returns memory for num_elements(shape) elements
// of the input's dtype that stays valid until the op completes. Throwing, or returning null for
// a non-empty output, fails the op on this rank only: the others complete.
using OutputAllocator =
    std::function<void*(const std::vector<int64_t>& shape, const std::vector<int64_t>& rows)>;

// Options of allgather_async, alltoall_async and reducescatter_async; an aggregate.
struct CollectiveOptions {
  OutputAllocator allocate;  // required
  // Fired exactly once on the coordinator thread when the op completes (result or error).
  std::function<void(const Status&)> callback;
  ReduceOp op = ReduceOp::kSum;  // reducescatter: the reduction (allreduce's rules of dtype)
  // alltoall: rows of the input (first dimension) sent to each rank, one entry per rank, summing
  // to the first dimension; empty: an equal share each (the first dimension divides by size()).
  // In a process set: one entry per rank of the set, in the set's order.
  std::vector<int64_t> splits;
  // The ranks that take part (add_process_set()); outputs are in the set's rank order.
  int process_set = 0;
};

// Number of elements of a shape (1 for a scalar); -1 if a dimension is negative or the number
// does not fit in int64_t.
int64_t num_elements(const std::vector<int64_t>& shape);
// Bytes of a tensor of `shape` and `dtype`; -1 where num_elements is, or the bytes do not fit
// in int64_t.
int64_t num_bytes(const std::vector<int64_t>& shape, DType dtype);
// Bytes of one element of `dtype`.
size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// True for kFloat32, kFloat64, kFloat16 and kBFloat16, the dtypes allreduce accepts.
bool is_floating_point(DType dtype);
const char* reduce_op_name(ReduceOp op);

}  // namespace arcreduce
