// Whether MPI may be handed device pointers, whether NCCL is used, and the transport the device
// path uses as a result (docs/cuda.md, "Transport").
#pragma once

#include <string>

#include "ops/allreduce_algorithm.h"
#include "ops/communicator.h"

namespace arcreduce {

// What the MPI library says about CUDA: 1 yes, 0 no, -1 it cannot say (not Open MPI, or built
// without the cuda extension). compiled_*: MPIX_CUDA_AWARE_SUPPORT of the headers this build
// used; runtime_*: MPIX_Query_cuda_support() of the library loaded now (after MPI_Init).
int mpi_cuda_support_compiled();
int mpi_cuda_support_runtime();

enum class DeviceTransport {
  kCudaAwareMpi,   // MPI reads and writes device buffers itself
  kPinnedStaging,  // device <-> pinned host copies on the runtime stream around host MPI
  kNccl,  // NCCL's All-Reduce enqueued on the runtime stream (ops/cuda/nccl_communicator.h)
};

// CUDA-aware only when both the headers and the loaded library say so (a library built with
// CUDA can still run without it, and an unknown answer is treated as no). `reason` says why,
// for the info log.
DeviceTransport choose_device_transport(int compiled, int runtime, std::string* reason);
const char* device_transport_name(DeviceTransport transport);

// Whether one sum All-Reduce of `type` may go to MPI as a device buffer: only with a CUDA-aware
// MPI, only through MPI_Allreduce itself (the ring reduces on the host) and only with MPI's own
// MPI_SUM (fp32, fp64; the fp16/bf16 sums are user-defined ops that read host memory).
bool mpi_takes_device_buffer(bool cuda_aware, ScalarType type, AllreduceAlgorithm algorithm);

// The ncclDataType_t value (nccl.h) of a sum of `type` through NCCL: fp32, fp64, fp16 and bf16;
// -1 for the other types, which the device path never sums (integers are only broadcast). Kept
// free of nccl.h so that every build can test it; the NCCL build checks the values against
// nccl.h at compile time.
int nccl_data_type(ScalarType type);

// The transport of one dense sum All-Reduce of `type` in device memory, for the setting of
// ARCREDUCE_CUDA_TRANSPORT:
//   "mpi":  never NCCL: kCudaAwareMpi when `mpi_takes_device_memory` (the communicator's
//           allreduce_accepts_device_memory() for this bucket: CUDA-aware MPI, MPI_Allreduce
//           itself, MPI's own sum), else kPinnedStaging.
//   "nccl": kNccl for every type NCCL sums (nccl_data_type() >= 0), else as "mpi"; throws Error
//           naming the variable when `nccl_built` is false (configuration validation rejects
//           this earlier; the check here keeps the function total).
//   "auto": as "nccl" when `nccl_built` and `ranks_are_processes`, else as "mpi".
// `ranks_are_processes`: every rank is its own process (an MPI communicator). The ranks of a
// loopback world are threads of one process sharing one device, which one NCCL communicator
// cannot hold, so "auto" stages them; an explicit "nccl" is still honoured (a one-rank world).
// ARCREDUCE_ALLREDUCE_ALGORITHM does not apply to NCCL, which picks its own algorithm. Throws
// Error for a setting other than these three. `reason`, when given, says why
// (for the info log).
DeviceTransport choose_cuda_transport(const std::string& setting, bool nccl_built,
                                      bool ranks_are_processes, bool mpi_takes_device_memory,
                                      ScalarType type, std::string* reason = nullptr);

}  // namespace arcreduce
