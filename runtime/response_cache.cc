#include "runtime/response_cache.h"

namespace arcreduce {

ResponseCache::ResponseCache(size_t capacity) : slots_(capacity) {
  for (size_t i = 0; i < capacity; ++i) free_.insert(i);
}

int64_t ResponseCache::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : static_cast<int64_t>(it->second);
}

void ResponseCache::put(const std::string& name, const TensorSignature& signature,
                        std::string* evicted) {
  evicted->clear();
  if (slots_.empty()) return;
  auto it = by_name_.find(name);
  if (it != by_name_.end()) {
    Slot& s = slots_[it->second];
    s.signature = signature;
    lru_.splice(lru_.begin(), lru_, s.lru);
    return;
  }
  if (free_.empty()) {
    size_t victim = lru_.back();
    *evicted = slots_[victim].name;
    erase(victim);
  }
  size_t slot = *free_.begin();
  free_.erase(free_.begin());
  Slot& s = slots_[slot];
  s.used = true;
  s.name = name;
  s.signature = signature;
  lru_.push_front(slot);
  s.lru = lru_.begin();
  by_name_[name] = slot;
}

void ResponseCache::erase(size_t slot) {
  Slot& s = slots_[slot];
  if (!s.used) return;
  lru_.erase(s.lru);
  by_name_.erase(s.name);
  s = Slot();
  free_.insert(slot);
}

}  // namespace arcreduce
