#include "ops/mpi_cuda_support.h"

#include "ops/mpi_include.h"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

namespace arcreduce {

int mpi_cuda_support_compiled() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_CUDA_AWARE_SUPPORT ? 1 : 0;
#else
  return -1;
#endif
}

int mpi_cuda_support_runtime() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support() ? 1 : 0;
#else
  return -1;
#endif
}

DeviceTransport choose_device_transport(int compiled, int runtime, std::string* reason) {
  auto say = [](int v) { return v == 1 ? "yes" : v == 0 ? "no" : "unknown"; };
  const std::string facts = std::string("MPI headers CUDA-aware: ") + say(compiled) +
                            ", loaded MPI library CUDA-aware: " + say(runtime);
  if (compiled == 1 && runtime == 1) {
    if (reason) *reason = facts + "; device buffers go to MPI directly";
    return DeviceTransport::kCudaAwareMpi;
  }
  if (reason) *reason = facts + "; device buffers are staged through pinned host memory";
  return DeviceTransport::kPinnedStaging;
}

const char* device_transport_name(DeviceTransport transport) {
  return transport == DeviceTransport::kCudaAwareMpi ? "cuda-aware-mpi" : "pinned-staging";
}

bool mpi_takes_device_buffer(bool cuda_aware, ScalarType type, AllreduceAlgorithm algorithm) {
  const bool builtin_sum = type == ScalarType::kFloat32 || type == ScalarType::kFloat64;
  return cuda_aware && builtin_sum && algorithm == AllreduceAlgorithm::kMpi;
}

}  // namespace arcreduce
