// The warm-up split both executors use, and the build without CUDA: no device executor (CUDA
// tensors are rejected at submission).
#include "runtime/device_executor.h"

#include "arcreduce/build_config.h"

namespace arcreduce {

WarmupSplit split_warmup(const std::vector<TensorEntry*>& entries, StateStore& state,
                         int64_t warmup_steps) {
  WarmupSplit split;
  for (TensorEntry* e : entries) {
    TensorState& s = state.get(e->name, static_cast<size_t>(e->signature.elements()));
    (static_cast<int64_t>(s.reductions) < warmup_steps ? split.warmup : split.compressed)
        .push_back(e);
    ++s.reductions;
  }
  return split;
}

}  // namespace arcreduce

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
