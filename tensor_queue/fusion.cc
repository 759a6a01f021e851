#include "tensor_queue/fusion.h"

namespace arcreduce {

bool fusable(const TensorSignature& a, const TensorSignature& b) {
  if (!cacheable(a.collective) || !cacheable(b.collective)) return false;
  return a.dtype == b.dtype && a.device == b.device && a.op == b.op &&
         a.compression == b.compression && a.collective == b.collective &&
         a.root_rank == b.root_rank;
}

std::vector<Bucket> plan_buckets(const std::vector<TensorSignature>& tensors,
                                 int64_t threshold_bytes) {
  std::vector<Bucket> buckets;
  std::vector<size_t> first_of_bucket;  // index of each bucket's first tensor (its key)
  const size_t threshold = threshold_bytes > 0 ? static_cast<size_t>(threshold_bytes) : 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t bytes = tensors[i].bytes();
    bool placed = false;
    for (size_t b = 0; b < buckets.size() && threshold > 0; ++b) {
      if (fusable(tensors[first_of_bucket[b]], tensors[i]) &&
          buckets[b].bytes + bytes <= threshold) {
        buckets[b].members.push_back(i);
        buckets[b].bytes += bytes;
        placed = true;
        break;
      }
    }
    if (!placed) {
      buckets.push_back(Bucket{{i}, bytes});
      first_of_bucket.push_back(i);
    }
  }
  return buckets;
}

}  // namespace arcreduce
