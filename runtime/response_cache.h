// ResponseCache: the steady-state fast path. Tensors that were negotiated before keep a slot; a
// rank that submits a cached tensor only sets that slot's bit, and one bitwise-AND All-Reduce of
// the bit vectors tells every rank which cached tensors are ready everywhere.
//
// Invariant: every rank holds the same entries in the same slots. It holds because the cache is
// only changed by put()/erase() calls made in the same order on every rank (while executing the
// agreed responses and invalidations of a cycle), and slot choice and LRU eviction are
// deterministic functions of that call sequence.
#pragma once

#include <cstdint>
#include <list>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor_queue/message.h"

namespace arcreduce {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity);

  size_t capacity() const { return slots_.size(); }
  // Slot of `name`, or -1.
  int64_t find(const std::string& name) const;
  const std::string& name(size_t slot) const { return slots_[slot].name; }
  const TensorSignature& signature(size_t slot) const { return slots_[slot].signature; }

  // Inserts `name` (or refreshes it) as the most recently used entry. If the cache was full the
  // least recently used entry is evicted and its name returned through `evicted`.
  void put(const std::string& name, const TensorSignature& signature, std::string* evicted);
  void erase(size_t slot);

 private:
  struct Slot {
    bool used = false;
    std::string name;
    TensorSignature signature;
    std::list<size_t>::iterator lru;
  };
  std::vector<Slot> slots_;
  std::list<size_t> lru_;  // front = most recently used
  std::set<size_t> free_;  // lowest free slot is taken first
  std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace arcreduce
