#include "handle_table.h"

#include <utility>

namespace arcreduce_torch {

void HandleTable::hold(uint64_t handle, at::Tensor tensor, std::shared_ptr<OutputSlot> output) {
  std::lock_guard<std::mutex> lock(mutex_);
  held_[handle] = Held{std::move(tensor), std::move(output)};
}

HandleTable::Held HandleTable::release(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = held_.find(handle);
  if (it == held_.end()) return Held{};
  Held held = std::move(it->second);
  held_.erase(it);
  return held;
}

size_t HandleTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.size();
}

}  // namespace arcreduce_torch
