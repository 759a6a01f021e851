// Whether MPI may be handed device pointers, and the transport the device path uses as a result.
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

}  // namespace arcreduce
