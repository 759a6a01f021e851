#include "compressors/registry.h"

#include <deque>

#include "arcreduce/status.h"
#include "compressors/compressor.h"

namespace arcreduce {

// The factories compressors.inc names, each defined with its compressor.
#define ARCREDUCE_NATIVE_PATH(name, flags, feedbacks, cuda)
#define ARCREDUCE_COMPRESSOR(name, factory, flags, feedbacks, cuda) \
  std::unique_ptr<Compressor> factory();
#include "compressors/compressors.inc"
#undef ARCREDUCE_NATIVE_PATH
#undef ARCREDUCE_COMPRESSOR

namespace {

// compressors.inc's flags, each one of CompressorTraits' booleans.
enum : unsigned {
  kDense = 1u << 0,        // dense
  kFixedRatio = 1u << 1,   // !uses_ratio
  kGranularity = 1u << 2,  // uses_granularity
  kOwnResidual = 1u << 3,  // keeps_own_residual
  kOwnWarmup = 1u << 4,    // does_own_warmup
};

CompressorTraits row(const char* name, CompressorFactory factory, unsigned flags,
                     FeedbackSet feedbacks, CudaPath cuda) {
  CompressorTraits t;
  t.name = name;
  t.factory = factory;
  t.dense = (flags & kDense) != 0;
  t.uses_ratio = (flags & kFixedRatio) == 0;
  t.uses_granularity = (flags & kGranularity) != 0;
  t.keeps_own_residual = (flags & kOwnResidual) != 0;
  t.does_own_warmup = (flags & kOwnWarmup) != 0;
  t.feedbacks = feedbacks;
  t.cuda = cuda;
  return t;
}

// compressors.inc's rows, then register_compressor()'s. A deque: rows never move, so the
// pointers find_compressor() returns stay valid as rows are added.
std::deque<CompressorTraits>& rows() {
  static std::deque<CompressorTraits> table = {
#define ARCREDUCE_NATIVE_PATH(name, flags, feedbacks, cuda) \
  row(name, nullptr, flags, feedbacks, cuda),
#define ARCREDUCE_COMPRESSOR(name, factory, flags, feedbacks, cuda) \
  row(name, &factory, flags, feedbacks, cuda),
#include "compressors/compressors.inc"
#undef ARCREDUCE_NATIVE_PATH
#undef ARCREDUCE_COMPRESSOR
  };
  return table;
}

}  // namespace

const CompressorTraits* find_compressor(const std::string& name) {
  for (const CompressorTraits& t : rows()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> registered_compressors() {
  std::vector<std::string> names;
  for (const CompressorTraits& t : rows()) names.push_back(t.name);
  return names;
}

void register_compressor(CompressorTraits traits) {
  if (find_compressor(traits.name)) {
    throw Error("compressor '" + traits.name + "' is registered already",
                StatusCode::kInvalidArgument);
  }
  if (!traits.factory) {
    throw Error("compressor '" + traits.name + "' has no factory", StatusCode::kInvalidArgument);
  }
  if (!(traits.feedbacks & kNoFeedback)) {
    throw Error("compressor '" + traits.name + "': its error feedbacks must include 'none'",
                StatusCode::kInvalidArgument);
  }
  rows().push_back(std::move(traits));
}

std::unique_ptr<Compressor> make_compressor(const std::string& name) {
  const CompressorTraits* t = find_compressor(name);
  return t && t->factory ? t->factory() : nullptr;
}

bool compressor_available(const std::string& name) {
  return find_compressor(name) != nullptr;
}

bool keeps_own_residual(const std::string& name) {
  const CompressorTraits* t = find_compressor(name);
  return t && t->keeps_own_residual;
}

}  // namespace arcreduce
