#include "compressors/powersgd.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "compressors/matrix_view.h"
#include "compressors/powersgd_math.h"

namespace arcreduce {
namespace {

// Names of PowerSGD's entries in TensorState (docs/compressors.md, "State files").
constexpr const char* kError = "powersgd.error";  // floats, d: M - P Q_i^T of the last step
constexpr const char* kQ = "powersgd.q";          // floats, q x m: Q's columns back to back

// One tensor on the low-rank path during one call.
struct LowRank {
  CompressTensor* tensor;
  TensorState* state;
  float* m;  // the error buffer, holding M = g + error until the output is known
  int64_t rows, cols;
  int q;
  size_t p_offset = 0, q_offset = 0;  // in the P and Q buffers
};

// One tensor reduced exactly, inside the P All-Reduce.
struct Dense {
  CompressTensor* tensor;
  size_t offset;
};

// Step 2: the warm-start Q, with every all-zero column (first step: all of them; later: a
// zero gradient made it so) drawn from the shared stream of (seed, name, step), then
// orthogonalised. Q is identical on every rank before and after, so the draw needs no message.
void prepare_q(LowRank& w, uint64_t seed) {
  std::vector<float>& qt = w.state->floats[kQ];
  const auto cols = static_cast<size_t>(w.cols);
  if (qt.size() != cols * w.q) qt.assign(cols * w.q, 0.0f);
  std::vector<float> drawn;
  for (int c = 0; c < w.q; ++c) {
    float* column = qt.data() + c * cols;
    if (std::any_of(column, column + cols, [](float v) { return v != 0.0f; })) continue;
    if (drawn.empty()) {
      drawn.resize(qt.size());
      const CompressTensor& t = *w.tensor;
      kernels::fill_gaussian(kernels::philox_key(seed, t.name, t.step), drawn.data(), drawn.size());
    }
    std::copy(drawn.begin() + c * cols, drawn.begin() + (c + 1) * cols, column);
  }
  powersgd::orthogonalize_columns(qt.data(), w.cols, w.q, false);
}

}  // namespace

void PowerSgd::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  if (ctx.state == nullptr) throw Error("powersgd: no compressor state store in the context");
  const CompressorOptions& options = ctx.options;
  if (options.powersgd.rank < 1) {
    throw Error("powersgd: ARCREDUCE_POWERSGD_RANK must be an integer >= 1, got " +
                std::to_string(options.powersgd.rank));
  }
  const float inv_ranks = 1.0f / static_cast<float>(ctx.comm.size());
  std::vector<LowRank> work;
  std::vector<Dense> dense;
  PackedBuffer& first = first_;
  PackedBuffer& second = second_;
  first.clear();
  second.clear();
  begin_phase(ctx, "project", "compress");
  for (CompressTensor& t : bucket) {
    TensorState& s = ctx.state->get(t.name, t.elements);
    const MatrixView view = matrix_view(t.shape);
    const int64_t q = powersgd::effective_rank(options.powersgd.rank, view.rows, view.cols);
    const bool low_rank =
        view.usable && static_cast<int64_t>(t.elements) >= options.min_compress_elements &&
        powersgd::worth_compressing(view.rows, view.cols, q, min_compression_rate_);
    if (!low_rank) {
      // The exact mean of g plus whatever error an earlier configuration left.
      const size_t offset = first.append(t.elements);
      float* x = first.at(offset);
      if (t.elements) std::memcpy(x, t.input, t.elements * sizeof(float));
      const std::vector<float>& error = s.floats[kError];
      if (error.size() == t.elements) kernels::axpby(1.0f, error.data(), 1.0f, x, t.elements);
      if (t.contribution && t.elements) {
        std::memcpy(t.contribution, x, t.elements * sizeof(float));
      }
      s.floats.erase(kError);
      s.floats.erase(kQ);
      dense.push_back({&t, offset});
      ++ctx.stats.dense_fallbacks;
      ctx.stats.value_bytes += t.elements * sizeof(float);
      continue;
    }
    std::vector<float>& error = s.floats[kError];
    if (error.size() != t.elements) error.assign(t.elements, 0.0f);
    kernels::axpby(1.0f, t.input, 1.0f, error.data(), t.elements);  // step 1: M
    LowRank w{&t, &s, error.data(), view.rows, view.cols, static_cast<int>(q)};
    prepare_q(w, options.seed);
    w.p_offset = first.append(static_cast<size_t>(w.rows) * w.q);
    powersgd::project(w.m, w.rows, w.cols, s.floats[kQ].data(), w.q, first.at(w.p_offset));
    ctx.stats.value_bytes += static_cast<uint64_t>(w.rows + w.cols) * w.q * sizeof(float);
    work.push_back(w);
  }

  if (first.size()) {
    begin_phase(ctx, "P collective", "communicate");
    ctx.comm.allreduce(first.data(), first.size(), ScalarType::kFloat32, CollectiveOp::kSum);
  }
  for (const Dense& d : dense) {
    CompressTensor& t = *d.tensor;
    if (!t.elements) continue;
    float* mean = first.at(d.offset);
    kernels::scale(mean, t.elements, inv_ranks);
    std::memcpy(t.output, mean, t.elements * sizeof(float));
  }
  if (work.empty()) return;

  begin_phase(ctx, "back project", "compress");
  for (LowRank& w : work) {  // steps 4 and 5
    float* p = first.at(w.p_offset);
    powersgd::orthogonalize_columns(p, w.rows, w.q, true);
    w.q_offset = second.append(static_cast<size_t>(w.cols) * w.q);
    powersgd::back_project(w.m, w.rows, w.cols, p, w.q, second.at(w.q_offset));
  }
  own_q_.assign(second.data(), second.data() + second.size());
  begin_phase(ctx, "Q collective", "communicate");
  ctx.comm.allreduce(second.data(), second.size(), ScalarType::kFloat32, CollectiveOp::kSum);
  kernels::scale(second.data(), second.size(), inv_ranks);

  begin_phase(ctx, "decompress", "decompress");
  for (LowRank& w : work) {  // step 6
    CompressTensor& t = *w.tensor;
    const float* qt = second.at(w.q_offset);
    // Output P Q^T; this rank's contribution P Q_i^T (whose mean over ranks is the output)
    // leaves the error.
    powersgd::expand(first.at(w.p_offset), w.rows, w.q, qt, own_q_.data() + w.q_offset, w.cols,
                     t.output, t.contribution, w.m);
    std::vector<float>& kept_q = w.state->floats[kQ];
    std::copy(qt, qt + kept_q.size(), kept_q.begin());
  }
}

// The factory its row in compressors.inc names.
std::unique_ptr<Compressor> make_powersgd() {
  return std::make_unique<PowerSgd>();
}

}  // namespace arcreduce
