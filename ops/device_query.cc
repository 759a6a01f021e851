#include "ops/device_query.h"

#include "arcreduce/build_config.h"

namespace arcreduce {

std::string check_cuda_tensor(const Tensor& tensor, const std::string& who,
                              const DeviceQuery* query, int process_device) {
  if (!query) return who + ": CUDA tensor, but this build of arcreduce has no CUDA";
  std::string error;
  const int count = query->device_count(&error);
  if (count <= 0) {
    return who + ": CUDA tensor, but no CUDA device is usable on this rank (" +
           (error.empty() ? std::string("the CUDA runtime reports 0 devices") : error) + ")";
  }
  const int index = tensor.device.index;
  if (index < 0 || index >= count) {
    return who + ": CUDA device index " + std::to_string(index) + " is out of range (this rank " +
           "sees " + std::to_string(count) + " device" + (count == 1 ? "" : "s") + ", 0.." +
           std::to_string(count - 1) + ")";
  }
  if (process_device >= 0 && index != process_device) {
    return who + ": CUDA device " + std::to_string(index) + ", but this process reduces on " +
           "device " + std::to_string(process_device) + " (one GPU per process, as its earlier " +
           "CUDA tensors)";
  }
  bool empty = false;
  for (int64_t d : tensor.shape) empty |= d == 0;
  if (empty) return "";
  const PointerInfo info = query->pointer_info(tensor.data);
  switch (info.kind) {
    case PointerKind::kDevice:
    case PointerKind::kManaged:
      if (info.device != index) {
        return who + ": data lives on CUDA device " + std::to_string(info.device) +
               " but the tensor says device " + std::to_string(index);
      }
      return "";
    case PointerKind::kHost:
      return who + ": Device::kCUDA, but data is host memory (pass Device::kCPU, or a device " +
             "pointer)";
    case PointerKind::kUnknown:
      break;
  }
  return who + ": Device::kCUDA, but data is not memory the CUDA runtime knows (a host pointer " +
         "that was never registered?)";
}

#if !ARCREDUCE_CUDA
std::unique_ptr<DeviceQuery> make_cuda_device_query() {
  return nullptr;
}
#endif

}  // namespace arcreduce
