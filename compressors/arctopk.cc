#include "compressors/arctopk.h"

#include <cstring>

#include "compressors/dense_mean.h"
#include "compressors/kernels/kernels.h"
#include "compressors/matrix_view.h"
#include "compressors/selection_check.h"

namespace arcreduce {
namespace {

enum class Path {
  kDense,   // no useful matrix view or too small: exact mean
  kExact,   // the sketch would not be smaller than the tensor: sum it, select by exact norms
  kSketch,  // the ARC path
};

struct Plan {
  CompressTensor* t;
  Path path;
  MatrixView view;
  int64_t k = 0;
  size_t first = 0;   // offset in the first (sketch) buffer
  size_t second = 0;  // offset in the second (values) buffer
  std::vector<int64_t> rows;
};

}  // namespace

void ArcTopK::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  const int r = ctx.config.sketch_rank;
  const float inv_n = 1.0f / static_cast<float>(ctx.comm.size());
  std::vector<Plan> plans;
  PackedBuffer& first = first_;
  PackedBuffer& second = second_;
  std::vector<float>& projection = projection_;
  first.clear();
  second.clear();

  for (CompressTensor& t : bucket) {
    Plan p{&t, Path::kDense, matrix_view(t.shape)};
    if (p.view.usable && static_cast<int64_t>(t.elements) >= ctx.config.min_compress_elements) {
      const int64_t n = p.view.rows, m = p.view.cols;
      p.k = kept(ctx.spec.ratio, n);
      const bool sketch_smaller = r < m && n * r + p.k * m < n * m;
      p.path = sketch_smaller ? Path::kSketch : Path::kExact;
    }
    if (p.path == Path::kSketch) {
      const int64_t n = p.view.rows, m = p.view.cols;
      projection.resize(static_cast<size_t>(m) * r);
      kernels::fill_gaussian(kernels::philox_key(ctx.config.seed, t.name, t.step),
                             projection.data(), projection.size());
      p.first = first.append(static_cast<size_t>(n) * r);
      kernels::sketch(t.input, n, m, projection.data(), r, first.at(p.first));
      ctx.stats.sketch_bytes += static_cast<uint64_t>(n) * r * sizeof(float);
    } else {
      p.first = first.append(t.elements);
      if (t.elements) std::memcpy(first.at(p.first), t.input, t.elements * sizeof(float));
      ctx.stats.value_bytes += t.elements * sizeof(float);
      if (p.path == Path::kDense) ++ctx.stats.dense_fallbacks;
    }
    plans.push_back(std::move(p));
  }
  if (first.size()) {
    ctx.comm.allreduce(first.data(), first.size(), ScalarType::kFloat32, CollectiveOp::kSum);
  }

  // Selection: identical on every rank because it only reads summed data.
  std::vector<float>& scores = scores_;
  for (Plan& p : plans) {
    CompressTensor& t = *p.t;
    if (p.path == Path::kDense) {
      for (size_t i = 0; i < t.elements; ++i) t.output[i] = first.at(p.first)[i] * inv_n;
      if (t.contribution && t.elements) {
        std::memcpy(t.contribution, t.input, t.elements * sizeof(float));
      }
      continue;
    }
    const int64_t n = p.view.rows, m = p.view.cols;
    scores.resize(static_cast<size_t>(n));
    if (p.path == Path::kExact) {
      kernels::row_sq_norms(first.at(p.first), n, m, scores.data());
    } else {
      kernels::sketch_row_scores(first.at(p.first), n, r, scores.data());
    }
    p.rows.resize(static_cast<size_t>(p.k));
    kernels::top_k_rows(scores.data(), n, p.k, p.rows.data());
    ctx.stats.selected_rows += static_cast<uint64_t>(p.k);
    if (p.path == Path::kSketch) {
      p.second = second.append(static_cast<size_t>(p.k) * m);
      kernels::gather_rows(t.input, m, p.rows.data(), p.k, second.at(p.second));
      ctx.stats.value_bytes += static_cast<uint64_t>(p.k) * m * sizeof(float);
    }
  }
  if (second.size()) {
    ctx.comm.allreduce(second.data(), second.size(), ScalarType::kFloat32, CollectiveOp::kSum);
    kernels::scale(second.data(), second.size(), inv_n);
  }

  std::vector<std::string> names;
  std::vector<uint64_t> hashes;
  std::vector<float>& packed = packed_;
  for (Plan& p : plans) {
    if (p.path == Path::kDense) continue;
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
    if (p.path == Path::kSketch) {
      summed_rows = second.at(p.second);
    } else {
      packed.resize(row_block);
      kernels::gather_rows(first.at(p.first), m, p.rows.data(), p.k, packed.data());
      kernels::scale(packed.data(), row_block, inv_n);
      summed_rows = packed.data();
    }
    kernels::scatter_rows(summed_rows, m, p.rows.data(), p.k, t.output);
    if (t.contribution) {
      if (!t.sparse) kernels::fill(t.contribution, t.elements, 0.0f);
      packed.resize(row_block);
      kernels::gather_rows(t.input, m, p.rows.data(), p.k, packed.data());
      kernels::scatter_rows(packed.data(), m, p.rows.data(), p.k, t.contribution);
    }
    if (ctx.config.check_consistency) {
      names.push_back(t.name);
      hashes.push_back(kernels::hash_indices(p.rows.data(), p.k));
    }
  }
  if (ctx.config.check_consistency) check_same_selection(ctx.comm, names, hashes);
}

}  // namespace arcreduce
