// Error-feedback buffers of CUDA tensors in device memory (docs/cuda.md, "State"): the ARC-Top-K
// device pipeline reads and updates them on the runtime stream, so they never cross PCIe during
// training. Counters and flags (reductions, compressed_steps, ef_started) stay in the host
// StateStore; this store is its mirror for the fp32 buffers (e, h, hbar, v):
//   - save_state copies them into the TensorStates first (write_back, after the streams drain);
//   - load_state marks them stale, and the next use re-reads the loaded TensorState (or zeros
//     when the file has no buffer of that tensor's size).
// Every method runs with the StateStore's mutex held: the coordinator holds it for a whole
// compressed bucket, save_state and load_state for theirs.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "compressors/arctopk_device_feedback.h"
#include "compressors/tensor_state.h"
#include "ops/cuda/cuda_handles.h"

namespace arcreduce {

class DeviceFeedbackStore : public StateMirror {
 public:
  // Fills t.e, t.h, t.hbar, t.v (those `need` names) with device buffers of t.elements floats
  // on `device`, initialised on `stream` from `host` when it holds a buffer of that size, else
  // zeros. Throws Error (ARC_CUDA_CHECK).
  void bind(ArcFeedbackTensor& t, const FeedbackBuffers& need, int device, cudaStream_t stream,
            const TensorState& host);

  // The buffers of `elements` floats the tensor's state holds, on the device or in `host`.
  FeedbackBuffers held(const std::string& name, size_t elements, const TensorState& host) const;
  // Forgets EF21's estimates h and hbar, on the device and in `host` (efm, which does not use
  // them, started over, as ErrorFeedback does on the host).
  void drop_estimates(const std::string& name, TensorState& host);

  void write_back(StateStore& store) override;
  void invalidate() override { stale_ = true; }

 private:
  struct Entry {
    int device = -1;
    size_t elements = 0;
    cudaStream_t stream = nullptr;  // the runtime stream that last used the buffers
    cuda::DeviceMemory e, h, hbar, v;
    bool has_e = false, has_h = false, has_hbar = false, has_v = false;
  };
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  bool stale_ = false;
};

}  // namespace arcreduce
