// NcclCommunicator: NCCL's sum All-Reduce of device buffers, enqueued on a CUDA stream
// (docs/cuda.md, "Transport"). One instance per device of a process, over the ranks of an
// arcreduce Communicator (which carries NCCL's unique id at creation). nccl.h stays out of this
// header (the NCCL types live in the implementation), so code that uses it compiles the same in
// a build without NCCL, where create() throws. Not thread-safe: the coordinator thread owns it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "ops/communicator.h"

namespace arcreduce {
namespace cuda {

// Whether this build links NCCL (ARCREDUCE_NCCL).
bool nccl_compiled();

// Throws Error (kInternal): "<call> failed at <file>:<line>: <ncclGetErrorString>", plus NCCL's
// last error message where it has one. `result` is an ncclResult_t (an int here so this header
// needs no nccl.h). Used by ARC_NCCL_CHECK in the implementation.
[[noreturn]] void throw_nccl_error(int result, const char* call, const char* file, int line);

class NcclCommunicator {
 public:
  // Collective over every rank of `comm`: all of them call it, in the same order relative to
  // their other collectives on `comm`. Rank 0 creates NCCL's unique id and broadcasts it through
  // comm.broadcast(); every rank then checks that it got it and could select `device`
  // (comm.allgather(), so a rank that fails before NCCL's initialisation fails every rank instead
  // of leaving them waiting in it), and joins with ncclCommInitRank on `device`. The caller's
  // current device is restored. Throws Error naming the device and NCCL's (or CUDA's) error
  // string; a failure inside ncclCommInitRank itself is reported by NCCL on the ranks it
  // concerns. In a build without NCCL throws Error saying so, without communicating.
  static std::unique_ptr<NcclCommunicator> create(Communicator& comm, int device);
  // Releases NCCL's communicator: ncclCommDestroy, or ncclCommAbort when NCCL reported an
  // asynchronous error (destroying would wait for work that cannot finish). Never throws; a
  // failure is logged. Work enqueued by allreduce() must have completed or be abandoned.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int device() const;
  int rank() const;
  int size() const;

  // Enqueues an in-place sum All-Reduce of `count` elements of `type` at `data` (device memory
  // of device()) on `stream` (a stream of device()) and returns without synchronising: the
  // result is in `data` once the stream reaches this point, and work enqueued on `stream` later
  // sees it. Every rank must make the same calls in the same order with the same count and type.
  // fp32, fp64, fp16 and bf16; NCCL adds in its own order and with its own fp16/bf16 rounding,
  // so sums may differ in the last bits from the MPI paths. count 0 enqueues nothing. Throws
  // Error with ncclGetErrorString and file:line when NCCL refuses the call, or for another type.
  void allreduce(void* data, size_t count, ScalarType type, cudaStream_t stream);

  // Throws Error (kInternal) if NCCL reports an asynchronous error on this communicator
  // (ncclCommGetAsyncError: a peer failed, a network error). Call after waiting on the stream,
  // e.g. when its completion event is reached: a failed NCCL kernel may otherwise look complete.
  void check_async();

 private:
  struct Impl;
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuda
}  // namespace arcreduce
