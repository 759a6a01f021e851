#include "compressors/arctopk.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "compressors/arc_path.h"
#include "compressors/dense_mean.h"
#include "compressors/kernels/kernels.h"
#include "compressors/matrix_view.h"
#include "compressors/selection_check.h"

namespace arcreduce {
namespace {

// ARCREDUCE_RANDOM_ROWS: the drawn rows get an infinite score, so the top k are they plus the
// best of the rest.
void mark_random_rows(const CompressorOptions& options, const CompressTensor& t, int64_t n,
                      int64_t k, float* scores) {
  const int64_t count = random_row_count(options.arctopk.random_rows, k);
  if (count == 0) return;
  std::vector<int64_t> drawn(static_cast<size_t>(count));
  draw_random_rows(options.seed, t.name, t.step, n, count, drawn.data());
  for (int64_t row : drawn) scores[row] = std::numeric_limits<float>::infinity();
}

constexpr size_t kNone = ~size_t{0};

struct Plan {
  CompressTensor* t;
  ArcPath path;
  MatrixView view;
  int64_t k = 0;
  size_t first = 0;   // offset in the first (sketch) buffer
  size_t second = 0;  // offset in the second (values) buffer
  std::vector<int64_t> rows;
  const float* input = nullptr;  // the tensor's input where a path reads it whole
  size_t materialized = kNone;   // offset of a lazy input produced whole
};

}  // namespace

// Rows of one sketch block: 64 KiB of input, so a lazily produced block is still in cache when
// the sketch reads it.
constexpr int64_t kBlockFloats = 16384;

void ArcTopK::sketch_tensor(CompressTensor& t, int64_t n, int64_t m, int r, float* sketch) {
  if (!t.lazy) {
    if (!sketch) return;
    kernels::sketch_transposed(t.input, n, m, transposed_.data(), r, sketch);
    return;
  }
  const int64_t block_rows = std::max<int64_t>(1, kBlockFloats / m);
  block_.resize(static_cast<size_t>(std::min(block_rows, n) * m));
  for (int64_t row = 0; row < n; row += block_rows) {
    const int64_t rows = std::min(block_rows, n - row);
    const auto begin = static_cast<size_t>(row * m);
    t.lazy->stream(begin, begin + static_cast<size_t>(rows * m), block_.data());
    if (!sketch) continue;  // the stream only produces the input (kRandom)
    kernels::sketch_transposed(block_.data(), rows, m, transposed_.data(), r, sketch + row * r);
  }
}

void ArcTopK::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  const int r = ctx.options.arctopk.sketch_rank;
  const float inv_n = 1.0f / static_cast<float>(ctx.comm.size());
  std::vector<Plan> plans;
  PackedBuffer& first = first_;
  PackedBuffer& second = second_;
  first.clear();
  second.clear();
  materialized_.clear();
  begin_phase(ctx, "sketch", "compress");

  for (CompressTensor& t : bucket) {
    const ArcTensorPath choice = arc_path(t.shape, t.elements, ctx.spec.ratio, ctx.options);
    Plan p{&t, choice.path, choice.view, choice.k};
    p.input = t.input;
    if (p.path == ArcPath::kSketch) {
      const int64_t n = p.view.rows, m = p.view.cols;
      transposed_.resize(static_cast<size_t>(m) * r);
      kernels::fill_gaussian_transposed(kernels::philox_key(ctx.options.seed, t.name, t.step), m, r,
                                        transposed_.data());
      p.first = first.append(static_cast<size_t>(n) * r);
      sketch_tensor(t, n, m, r, first.at(p.first));
      ctx.stats.sketch_bytes += static_cast<uint64_t>(n) * r * sizeof(float);
    } else if (p.path == ArcPath::kRandom) {
      sketch_tensor(t, p.view.rows, p.view.cols, r, nullptr);  // a lazy input is produced in e
    } else {
      p.first = first.append(t.elements);
      if (t.lazy) {
        // The other paths need the whole input: produce it once, keep it as the input.
        const size_t at = materialized_.append(t.elements);
        t.lazy->stream(0, t.elements, materialized_.at(at));
        p.materialized = at;
      } else if (t.elements) {
        std::memcpy(first.at(p.first), t.input, t.elements * sizeof(float));
      }
      ctx.stats.value_bytes += t.elements * sizeof(float);
      if (p.path == ArcPath::kDense) ++ctx.stats.dense_fallbacks;
    }
    plans.push_back(std::move(p));
  }
  // Materialised inputs are copied only now: materialized_ may have grown (moved) above.
  for (Plan& p : plans) {
    if (p.materialized == kNone) continue;
    p.input = materialized_.at(p.materialized);
    if (p.t->elements) {
      std::memcpy(first.at(p.first), p.input, p.t->elements * sizeof(float));
    }
  }
  if (first.size()) {
    begin_phase(ctx, "sketch collective", "communicate");
    ctx.comm.allreduce(first.data(), first.size(), ScalarType::kFloat32, CollectiveOp::kSum);
  }
  begin_phase(ctx, "select", "compress");

  // Selection: identical on every rank because it only reads summed data.
  std::vector<float>& scores = scores_;
  for (Plan& p : plans) {
    CompressTensor& t = *p.t;
    if (p.path == ArcPath::kDense) {
      for (size_t i = 0; i < t.elements; ++i) t.output[i] = first.at(p.first)[i] * inv_n;
      if (t.contribution && t.elements) {
        std::memcpy(t.contribution, p.input, t.elements * sizeof(float));
      }
      continue;
    }
    const int64_t n = p.view.rows, m = p.view.cols;
    scores.resize(static_cast<size_t>(n));
    if (p.path == ArcPath::kExact) {
      kernels::row_sq_norms(first.at(p.first), n, m, scores.data());
    } else if (p.path == ArcPath::kSketch) {
      kernels::sketch_row_scores(first.at(p.first), n, r, scores.data());
    } else {
      kernels::fill(scores.data(), static_cast<size_t>(n), 0.0f);  // every row is drawn below
    }
    mark_random_rows(ctx.options, t, n, p.k, scores.data());
    p.rows.resize(static_cast<size_t>(p.k));
    kernels::top_k_rows(scores.data(), n, p.k, p.rows.data());
    ctx.stats.selected_rows += static_cast<uint64_t>(p.k);
    if (arc_sends_rows(p.path)) {
      p.second = second.append(static_cast<size_t>(p.k) * m);
      float* own_rows = second.at(p.second);
      if (t.lazy) {
        t.lazy->gather_rows(p.rows.data(), p.k, m, own_rows);
      } else {
        kernels::gather_rows(t.input, m, p.rows.data(), p.k, own_rows);
      }
      // This rank's contribution is exactly the rows it sends: record it before the sum.
      if (t.contribution) {
        if (!t.allow_sparse) kernels::fill(t.contribution, t.elements, 0.0f);
        kernels::scatter_rows(own_rows, m, p.rows.data(), p.k, t.contribution);
      }
      ctx.stats.value_bytes += static_cast<uint64_t>(p.k) * m * sizeof(float);
    }
  }
  if (second.size()) {
    begin_phase(ctx, "values collective", "communicate");
    ctx.comm.allreduce(second.data(), second.size(), ScalarType::kFloat32, CollectiveOp::kSum);
    kernels::scale(second.data(), second.size(), inv_n);
  }

  begin_phase(ctx, "decompress", "decompress");
  std::vector<std::string> names;
  std::vector<uint64_t> hashes;
  std::vector<float>& packed = packed_;
  for (Plan& p : plans) {
    if (p.path == ArcPath::kDense) continue;
    CompressTensor& t = *p.t;
    const int64_t m = p.view.cols;
    const size_t row_block = static_cast<size_t>(p.k) * m;
    t.sparse = t.allow_sparse;
    if (t.sparse) {
      t.rows = p.rows;
      t.row_length = m;
    } else {
      kernels::fill(t.output, t.elements, 0.0f);
    }
    const float* summed_rows;
    if (arc_sends_rows(p.path)) {
      summed_rows = second.at(p.second);
    } else {
      packed.resize(row_block);
      kernels::gather_rows(first.at(p.first), m, p.rows.data(), p.k, packed.data());
      kernels::scale(packed.data(), row_block, inv_n);
      summed_rows = packed.data();
    }
    kernels::scatter_rows(summed_rows, m, p.rows.data(), p.k, t.output);
    if (t.contribution && p.path == ArcPath::kExact) {
      if (!t.sparse) kernels::fill(t.contribution, t.elements, 0.0f);
      packed.resize(row_block);
      kernels::gather_rows(p.input, m, p.rows.data(), p.k, packed.data());
      kernels::scatter_rows(packed.data(), m, p.rows.data(), p.k, t.contribution);
    }
    if (ctx.options.check_consistency) {
      names.push_back(t.name);
      hashes.push_back(kernels::hash_indices(p.rows.data(), p.k));
    }
  }
  if (ctx.options.check_consistency) check_same_selection(ctx.comm, names, hashes);
}

// The factory its row in compressors.inc names.
std::unique_ptr<Compressor> make_arctopk() {
  return std::make_unique<ArcTopK>();
}

}  // namespace arcreduce
