#include "runtime/cuda/device_feedback_store.h"

#include <vector>

#include "ops/cuda/cuda_check.h"

namespace arcreduce {
namespace {

// One buffer: allocated once per (tensor, size), initialised from the host copy or zeros.
float* bind_buffer(cuda::DeviceMemory& memory, bool& present, size_t elements,
                   const std::vector<float>& host, cudaStream_t stream) {
  const size_t bytes = elements * sizeof(float);
  if (!present) {
    auto* data = static_cast<float*>(memory.reserve(std::max<size_t>(bytes, sizeof(float))));
    if (bytes && host.size() == elements) {
      // Pageable source: the call returns once the values are staged, so `host` may change.
      ARC_CUDA_CHECK(cudaMemcpyAsync(data, host.data(), bytes, cudaMemcpyHostToDevice, stream));
    } else if (bytes) {
      ARC_CUDA_CHECK(cudaMemsetAsync(data, 0, bytes, stream));
    }
    present = true;
  }
  return static_cast<float*>(memory.data());
}

void copy_back(const cuda::DeviceMemory& memory, bool present, size_t elements,
               std::vector<float>& host) {
  if (!present) return;
  host.resize(elements);
  if (elements) {
    ARC_CUDA_CHECK(
        cudaMemcpy(host.data(), memory.data(), elements * sizeof(float), cudaMemcpyDeviceToHost));
  }
}

}  // namespace

void DeviceFeedbackStore::bind(ArcFeedbackTensor& t, const FeedbackBuffers& need, int device,
                               cudaStream_t stream, const TensorState& host) {
  if (stale_) {
    // After load_state: every buffer is re-read from the loaded host state at its next use.
    for (auto& kv : entries_) {
      Entry& e = *kv.second;
      e.has_e = e.has_h = e.has_hbar = e.has_v = false;
    }
    stale_ = false;
  }
  std::unique_ptr<Entry>& slot = entries_[t.name];
  if (!slot || slot->device != device || slot->elements != t.elements) {
    // New tensor, or one that changed size or device (the host StateStore starts it over too).
    slot = std::make_unique<Entry>();
    slot->device = device;
    slot->elements = t.elements;
  }
  Entry& e = *slot;
  e.stream = stream;
  const size_t n = t.elements;
  if (need.e) t.e = bind_buffer(e.e, e.has_e, n, host.e, stream);
  if (need.h) t.h = bind_buffer(e.h, e.has_h, n, host.h, stream);
  if (need.hbar) t.hbar = bind_buffer(e.hbar, e.has_hbar, n, host.hbar, stream);
  if (need.v) t.v = bind_buffer(e.v, e.has_v, n, host.v, stream);
}

FeedbackBuffers DeviceFeedbackStore::held(const std::string& name, size_t elements,
                                          const TensorState& host) const {
  FeedbackBuffers b;
  b.e = host.e.size() == elements;
  b.h = host.h.size() == elements;
  b.hbar = host.hbar.size() == elements;
  b.v = host.v.size() == elements;
  auto it = entries_.find(name);
  if (it == entries_.end() || stale_ || it->second->elements != elements) return b;
  const Entry& e = *it->second;  // the device's buffers are newer than the host's
  b.e = b.e || e.has_e;
  b.h = b.h || e.has_h;
  b.hbar = b.hbar || e.has_hbar;
  b.v = b.v || e.has_v;
  return b;
}

void DeviceFeedbackStore::drop_estimates(const std::string& name, TensorState& host) {
  host.h.clear();
  host.hbar.clear();
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  it->second->has_h = it->second->has_hbar = false;
}

void DeviceFeedbackStore::write_back(StateStore& store) {
  if (stale_) return;  // the store already holds the newer (loaded) buffers
  for (auto& kv : entries_) {
    Entry& e = *kv.second;
    if (!(e.has_e || e.has_h || e.has_hbar || e.has_v)) continue;
    cuda::DeviceGuard guard(e.device);
    // The last bucket's updates may still be queued on the runtime stream.
    if (e.stream) ARC_CUDA_CHECK(cudaStreamSynchronize(e.stream));
    TensorState& s = store.get(kv.first, e.elements);
    copy_back(e.e, e.has_e, e.elements, s.e);
    copy_back(e.h, e.has_h, e.elements, s.h);
    copy_back(e.hbar, e.has_hbar, e.elements, s.hbar);
    copy_back(e.v, e.has_v, e.elements, s.v);
  }
}

}  // namespace arcreduce
