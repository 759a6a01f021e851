#include "handle_table.h"

#include <utility>

namespace arcreduce_torch {

void HandleTable::hold(uint64_t handle, at::Tensor tensor) {
  std::lock_guard<std::mutex> lock(mutex_);
  tensors_[handle] = std::move(tensor);
}

at::Tensor HandleTable::release(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = tensors_.find(handle);
  if (it == tensors_.end()) return at::Tensor();
  at::Tensor tensor = std::move(it->second);
  tensors_.erase(it);
  return tensor;
}

size_t HandleTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tensors_.size();
}

}  // namespace arcreduce_torch
