#include "ops/mpi_cuda_support.h"

#include "arcreduce/status.h"
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
  switch (transport) {
    case DeviceTransport::kCudaAwareMpi:
      return "cuda-aware-mpi";
    case DeviceTransport::kNccl:
      return "nccl";
    default:
      return "pinned-staging";
  }
}

bool mpi_takes_device_buffer(bool cuda_aware, ScalarType type, AllreduceAlgorithm algorithm) {
  const bool builtin_sum = type == ScalarType::kFloat32 || type == ScalarType::kFloat64;
  return cuda_aware && builtin_sum && algorithm == AllreduceAlgorithm::kMpi;
}

int nccl_data_type(ScalarType type) {
  // ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 (NCCL >= 2.10).
  switch (type) {
    case ScalarType::kFloat16:
      return 6;
    case ScalarType::kFloat32:
      return 7;
    case ScalarType::kFloat64:
      return 8;
    case ScalarType::kBFloat16:
      return 9;
    default:
      return -1;
  }
}

DeviceTransport choose_cuda_transport(const std::string& setting, bool nccl_built,
                                      bool ranks_are_processes, bool mpi_takes_device_memory,
                                      ScalarType type, std::string* reason) {
  auto say = [&](DeviceTransport transport, const std::string& why) {
    if (reason) *reason = std::string(device_transport_name(transport)) + ": " + why;
    return transport;
  };
  auto through_mpi = [&](const std::string& why) {
    return mpi_takes_device_memory
               ? say(DeviceTransport::kCudaAwareMpi, why + "; MPI takes the device buffer")
               : say(DeviceTransport::kPinnedStaging,
                     why + "; MPI does not take this device buffer, so it is staged");
  };
  const bool nccl_type = nccl_data_type(type) >= 0;
  if (setting == "mpi") return through_mpi("ARCREDUCE_CUDA_TRANSPORT=mpi");
  if (setting == "nccl") {
    if (!nccl_built) {
      throw Error(
          "ARCREDUCE_CUDA_TRANSPORT='nccl' is invalid: expected auto or mpi (this build of "
          "arcreduce has no NCCL)");
    }
    if (!nccl_type) {
      return through_mpi(std::string("NCCL does not sum ") + scalar_type_name(type));
    }
    return say(DeviceTransport::kNccl, "ARCREDUCE_CUDA_TRANSPORT=nccl");
  }
  if (setting == "auto") {
    if (!nccl_built) return through_mpi("auto, and this build has no NCCL");
    if (!ranks_are_processes) {
      return through_mpi("auto, and the ranks share one process (loopback), which NCCL cannot");
    }
    if (!nccl_type) return through_mpi(std::string("NCCL does not sum ") + scalar_type_name(type));
    return say(DeviceTransport::kNccl, "auto, and this build has NCCL");
  }
  throw Error("ARCREDUCE_CUDA_TRANSPORT='" + setting +
              "' is invalid: expected one of auto, nccl, mpi");
}

}  // namespace arcreduce
