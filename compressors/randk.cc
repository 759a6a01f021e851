#include "compressors/randk.h"

#include <cstring>

#include "compressors/dense_mean.h"
#include "compressors/kernels/kernels.h"
#include "compressors/matrix_view.h"
#include "compressors/selection_check.h"

namespace arcreduce {
namespace {

struct Draw {
  CompressTensor* t;
  bool dense = false;
  int64_t cols = 1;              // values per index (row granularity: the row length)
  std::vector<int64_t> indices;  // element indices (rows expanded)
  size_t offset = 0;             // in the packed buffer
};

}  // namespace

void RandK::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  const bool by_row = ctx.spec.granularity == "row";
  std::vector<Draw> draws;
  PackedBuffer packed;
  std::vector<int64_t> units;
  begin_phase(ctx, "select", "compress");
  for (CompressTensor& t : bucket) {
    Draw d{&t};
    const MatrixView view = matrix_view(t.shape);
    d.dense = static_cast<int64_t>(t.elements) < ctx.options.min_compress_elements ||
              t.elements == 0 || (by_row && !view.usable);
    if (d.dense) {
      d.offset = packed.append(t.elements);
      if (t.elements) std::memcpy(packed.at(d.offset), t.input, t.elements * sizeof(float));
      ++ctx.stats.dense_fallbacks;
      ctx.stats.value_bytes += t.elements * sizeof(float);
      draws.push_back(std::move(d));
      continue;
    }
    const int64_t n = by_row ? view.rows : static_cast<int64_t>(t.elements);
    d.cols = by_row ? view.cols : 1;
    const int64_t k = kept(ctx.spec.ratio, n);
    units.resize(static_cast<size_t>(k));
    kernels::sample_indices(kernels::philox_key(ctx.options.seed, t.name, t.step), n, k,
                            units.data());
    d.indices.resize(static_cast<size_t>(k * d.cols));
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t c = 0; c < d.cols; ++c) d.indices[i * d.cols + c] = units[i] * d.cols + c;
    }
    if (by_row) ctx.stats.selected_rows += static_cast<uint64_t>(k);
    d.offset = packed.append(d.indices.size());
    kernels::gather(t.input, d.indices.data(), static_cast<int64_t>(d.indices.size()),
                    packed.at(d.offset));
    ctx.stats.value_bytes += d.indices.size() * sizeof(float);
    draws.push_back(std::move(d));
  }
  if (packed.size()) {
    begin_phase(ctx, "values collective", "communicate");
    ctx.comm.allreduce(packed.data(), packed.size(), ScalarType::kFloat32, CollectiveOp::kSum);
    kernels::scale(packed.data(), packed.size(), 1.0f / static_cast<float>(ctx.comm.size()));
  }
  begin_phase(ctx, "decompress", "decompress");
  std::vector<std::string> names;
  std::vector<uint64_t> hashes;
  for (Draw& d : draws) {
    CompressTensor& t = *d.t;
    if (d.dense) {
      if (t.elements) std::memcpy(t.output, packed.at(d.offset), t.elements * sizeof(float));
      if (t.contribution && t.elements) {
        std::memcpy(t.contribution, t.input, t.elements * sizeof(float));
      }
      continue;
    }
    const auto k = static_cast<int64_t>(d.indices.size());
    kernels::fill(t.output, t.elements, 0.0f);
    kernels::scatter(packed.at(d.offset), d.indices.data(), k, t.output);
    if (t.contribution) {
      kernels::fill(t.contribution, t.elements, 0.0f);
      std::vector<float> own(static_cast<size_t>(k));
      kernels::gather(t.input, d.indices.data(), k, own.data());
      kernels::scatter(own.data(), d.indices.data(), k, t.contribution);
    }
    if (ctx.options.check_consistency) {
      names.push_back(t.name);
      hashes.push_back(kernels::hash_indices(d.indices.data(), k));
    }
  }
  if (ctx.options.check_consistency) check_same_selection(ctx.comm, names, hashes);
}

// The factory its row in compressors.inc names.
std::unique_ptr<Compressor> make_randk() {
  return std::make_unique<RandK>();
}

}  // namespace arcreduce
