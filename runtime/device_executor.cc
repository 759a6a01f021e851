// The build without CUDA: no device executor (CUDA tensors are rejected at submission).
#include "runtime/device_executor.h"

#include "arcreduce/build_config.h"

#if !ARCREDUCE_CUDA
namespace arcreduce {

std::unique_ptr<DeviceExecutor> make_device_executor(Context&, StateStore&) {
  return nullptr;
}

std::shared_ptr<void> record_default_stream(int device) {
  throw Error(
      "record_default_stream(" + std::to_string(device) + "): this build of arcreduce has no CUDA",
      StatusCode::kInvalidArgument);
}

}  // namespace arcreduce
#endif
