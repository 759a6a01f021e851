// Compressor: averages one bucket across ranks through a Communicator, in fp32.
//
// The executor converts every tensor of a bucket to an fp32 working copy and hands the bucket
// to the compressor (possibly wrapped in error-feedback decorators). All ranks call reduce()
// with the same tensors (names, shapes, step counts) in the same order; a compressor must issue
// the same collectives on every rank. It reports, per tensor, the mean over ranks of the
// compressed contributions (`output`) and, when asked, this rank's own compressed contribution
// C_i(x) (`contribution`, what error feedback subtracts).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "arcreduce/compressor_stats.h"
#include "common/logging.h"
#include "compressors/compressor_options.h"
#include "compressors/phase_log.h"
#include "compressors/registry.h"
#include "compressors/tensor_state.h"
#include "ops/communicator.h"
#include "tensor_queue/message.h"

namespace arcreduce {

// An input computed on demand instead of stored. Error feedback hands its difference (g - h, or
// v - h after the momentum update) this way to compressors that read the input in one ordered
// pass plus a few rows afterwards (ARC-Top-K's sketch, then the selected rows), so the
// difference never makes a round trip through memory.
class LazyInput {
 public:
  virtual ~LazyInput() = default;
  // Values [begin, end) into out. A compressor that receives a LazyInput must stream every
  // element exactly once, in increasing order, before any gather_rows(), and write the tensor's
  // output only after its whole stream: streaming may advance state (EF21M's momentum, efm's
  // velocity) and may write the output (its old hbar, or zeros).
  virtual void stream(size_t begin, size_t end, float* out) = 0;
  // Rows `rows` (k of them, `row_length` values each) into packed (k x row_length), after the
  // stream.
  virtual void gather_rows(const int64_t* rows, int64_t k, int64_t row_length, float* packed) = 0;
};

struct CompressTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t elements = 0;
  uint64_t step = 0;  // compressed steps this tensor has had (keys shared randomness)
  // x, `elements` values. May alias `output` only under error-feedback decorators, which read
  // all of their input before writing their output.
  const float* input = nullptr;
  float* output = nullptr;        // mean_i C_i(x), written completely
  float* contribution = nullptr;  // C_i(x) of this rank; null when nobody needs it

  // In: the caller reads output and contribution only on the support a row-sparse compressor
  // reports, so it may skip writing the zeros. Out: `sparse` set means only rows `rows` (sorted,
  // of `row_length` values each) of output and contribution were written; everything else is 0.
  bool allow_sparse = false;
  bool sparse = false;
  std::vector<int64_t> rows;
  int64_t row_length = 0;

  // Instead of `input` (which is then null), only for compressors whose accepts_lazy_input().
  LazyInput* lazy = nullptr;
};

struct CompressContext {
  Communicator& comm;
  const CompressorOptions& options;  // the job's settings (compressor_options.h)
  const CompressionSpec& spec;       // ratio, granularity, error feedback of this bucket
  CompressorStats& stats;
  const Logger& log;
  // This rank's per-tensor state, for compressors that keep their own (Ok-Topk's residual and
  // thresholds). The caller holds its mutex for the whole reduce(). Null only in tests of
  // stateless compressors; a compressor that needs it throws Error without it.
  StateStore* state = nullptr;
  // Where the bucket's phases are recorded for the timeline; null or disabled: nowhere.
  PhaseLog* phases = nullptr;
};

// Marks the start of a phase of the bucket (ending the previous one) in ctx.phases, if any.
inline void begin_phase(CompressContext& ctx, const char* name, const char* category) {
  if (ctx.phases) ctx.phases->begin(name, category);
}

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) = 0;
  // True when reduce() honours CompressTensor::lazy.
  virtual bool accepts_lazy_input() const { return false; }
  // True when reduce() allows a tensor's input and output to be the same memory as long as no
  // contribution is requested: it reads all of a tensor's input before writing its output. The
  // executor then reduces fp32 tensors without error feedback in their own memory.
  virtual bool reduces_in_place() const { return false; }
};

}  // namespace arcreduce
