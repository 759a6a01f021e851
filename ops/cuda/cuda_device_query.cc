// The CUDA runtime behind DeviceQuery (ops/device_query.h).
#include <cuda_runtime_api.h>

#include "ops/cuda/cuda_check.h"
#include "ops/device_query.h"

namespace arcreduce {
namespace {

class CudaDeviceQuery : public DeviceQuery {
 public:
  int device_count(std::string* error) const override {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      if (error) *error = cuda::cuda_error_string(rc);
      return 0;
    }
    return count;
  }

  PointerInfo pointer_info(const void* data) const override {
    cudaPointerAttributes attributes{};
    const cudaError_t rc = cudaPointerGetAttributes(&attributes, data);
    PointerInfo info;
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      return info;
    }
    info.device = attributes.device;
    switch (attributes.type) {
      case cudaMemoryTypeDevice:
        info.kind = PointerKind::kDevice;
        break;
      case cudaMemoryTypeManaged:
        info.kind = PointerKind::kManaged;
        break;
      case cudaMemoryTypeHost:
      case cudaMemoryTypeUnregistered:
        info.kind = PointerKind::kHost;
        break;
    }
    return info;
  }
};

}  // namespace

std::unique_ptr<DeviceQuery> make_cuda_device_query() {
  return std::make_unique<CudaDeviceQuery>();
}

}  // namespace arcreduce
