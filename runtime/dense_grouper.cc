#include "runtime/dense_grouper.h"

#include "compressors/registry.h"

namespace arcreduce {

bool DenseGrouper::holds(const TensorSignature& signature) {
  const CompressorTraits* traits = find_compressor(signature.compression.compressor);
  return signature.collective == Collective::kAllreduce && traits && traits->dense;
}

std::vector<Request> DenseGrouper::admit(std::vector<Request> incoming, Clock::time_point now) {
  if (min_bytes_ == 0) return incoming;
  std::vector<Request> out;
  for (Request& r : incoming) {
    const bool dense = holds(r.signature);
    if (steps_.add(r.name, dense, now)) {
      // A new step: nothing more joins what the previous one still holds.
      for (Request& h : held_) out.push_back(std::move(h));
      held_.clear();
      held_bytes_ = 0;
    }
    if (!dense || steps_.expected().empty()) {
      out.push_back(std::move(r));
      continue;
    }
    if (held_.empty()) held_since_ = now;
    held_bytes_ += r.signature.bytes();
    held_.push_back(std::move(r));
  }
  if (!held_.empty() && (held_bytes_ >= min_bytes_ || steps_.complete() || now >= deadline())) {
    for (Request& r : held_) out.push_back(std::move(r));
    held_.clear();
    held_bytes_ = 0;
  }
  return out;
}

std::vector<Request> DenseGrouper::release_all() {
  std::vector<Request> out;
  out.swap(held_);
  held_bytes_ = 0;
  return out;
}

}  // namespace arcreduce
