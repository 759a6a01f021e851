// The registry of compressors: one row per name (compressors/compressors.inc) with what the
// runtime needs to know of it besides its code. Every decision that depends on which compressor
// a tensor uses (whether its ratio or error feedback apply, which batching holds it, how the
// executors reduce it) reads its row, so that a new compressor is its own files plus one row.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compressors/feedback_kinds.h"

namespace arcreduce {

class Compressor;
using CompressorFactory = std::unique_ptr<Compressor> (*)();

// How the CUDA executor reduces a bucket of CUDA tensors (docs/cuda.md).
enum class CudaPath {
  kHostCopies,  // on host copies, through the compressor (the CPU executor's path)
  kDense,       // the executor's native-dtype dense path, on the device
  kArcTopK,     // ARC-Top-K's device pipeline (arctopk_device_feedback.h)
};

struct CompressorTraits {
  std::string name;
  // Builds the compressor. Null where there is none ("none"): the executor reduces the tensors
  // densely in their own dtype.
  CompressorFactory factory = nullptr;
  // No sparsification, every element reaches every rank (none, fp16): the runtime ignores the
  // ratio and error feedback asked for, the dense grouper may hold the tensor for a fuller bucket
  // and the step batcher does not hold it.
  bool dense = false;
  // The compression ratio sizes what it sends. Where it does not (PowerSGD's rank does; the
  // dense ones), the runtime fixes the tensor's ratio at 1, so that a ratio neither splits
  // buckets nor causes mismatch errors.
  bool uses_ratio = true;
  // ARCREDUCE_GRANULARITY (element or row) applies; elsewhere the tensor's granularity is empty.
  bool uses_granularity = false;
  // Keeps a residual of everything it did not reduce (oktopk, powersgd): its own error feedback.
  bool keeps_own_residual = false;
  // Runs the ARCREDUCE_WARMUP_STEPS itself: the executor does not send the tensor's first steps
  // densely, whatever the error feedback.
  bool does_own_warmup = false;
  // The error feedbacks that may wrap it, "none" always among them. A per-op request for another
  // is refused (ignored for dense ones); the job-wide ARCREDUCE_ERROR_FEEDBACK becomes "none".
  FeedbackSet feedbacks = kAnyFeedback;
  CudaPath cuda = CudaPath::kHostCopies;

  // The executor's native-dtype dense path ("none"): no compression at all.
  bool native() const { return factory == nullptr; }
  // Whether error feedback `name` may wrap it; false for a name that is no error feedback.
  bool takes_feedback(const std::string& name) const {
    const FeedbackRow* row = find_feedback(name);
    return row && (feedbacks & feedback_bit(row->kind)) != 0;
  }
};

// The row of `name`; null for a name without one.
const CompressorTraits* find_compressor(const std::string& name);
// The names of every row: compressors.inc's, then those register_compressor() added.
std::vector<std::string> registered_compressors();
// Adds a row for a compressor outside compressors.inc (tests build their own this way). Rows
// added here are reached through make_compressor(), find_compressor() and per-op compression
// options, not ARCREDUCE_COMPRESSOR, whose choices are compressors.inc's. Not synchronised with
// lookups: call it before any runtime or executor starts. Throws Error if the name has a row
// already, if the row has no factory ("none" is the one native path) or if its feedbacks lack
// "none".
void register_compressor(CompressorTraits traits);

// Thin lookups of the row. make_compressor: its factory's compressor; nullptr for "none" and
// names without a row.
std::unique_ptr<Compressor> make_compressor(const std::string& name);
// True for every name with a row.
bool compressor_available(const std::string& name);
// The row's keeps_own_residual: ARCREDUCE_ERROR_FEEDBACK does not wrap these (oktopk, powersgd).
bool keeps_own_residual(const std::string& name);

}  // namespace arcreduce
