// DeviceQuery: what the runtime asks the CUDA runtime about a tensor before accepting it (how
// many devices there are, where a pointer lives). An interface so that the checks built on it
// run, and are tested, in the CPU build with a fake; the CUDA build supplies the real one.
#pragma once

#include <memory>
#include <string>

#include "arcreduce/types.h"

namespace arcreduce {

enum class PointerKind { kHost, kDevice, kManaged, kUnknown };

struct PointerInfo {
  PointerKind kind = PointerKind::kUnknown;
  int device = -1;  // the device owning kDevice/kManaged memory
};

class DeviceQuery {
 public:
  virtual ~DeviceQuery() = default;
  // Usable devices. When the runtime cannot be used (no driver, no device) returns 0 and
  // writes the runtime's own error ("cudaErrorNoDevice: no CUDA-capable device is detected").
  virtual int device_count(std::string* error) const = 0;
  virtual PointerInfo pointer_info(const void* data) const = 0;
};

// The CUDA runtime's answers; nullptr in a build without CUDA.
std::unique_ptr<DeviceQuery> make_cuda_device_query();

// Empty when `tensor` (device kind kCUDA) may be reduced on this rank, else the reason, starting
// with `who` ("tensor 'w' on rank 3"). `query` null: this build has no CUDA. A process drives
// one GPU: `process_device` is the device of its earlier CUDA tensors (-1: none yet).
std::string check_cuda_tensor(const Tensor& tensor, const std::string& who,
                              const DeviceQuery* query, int process_device);

}  // namespace arcreduce
