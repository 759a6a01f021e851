#include "compressors/topk.h"

#include <cstring>
#include <limits>

#include "compressors/dense_mean.h"
#include "compressors/kernels/kernels.h"
#include "compressors/matrix_view.h"

namespace arcreduce {
namespace {

struct Selection {
  CompressTensor* t;
  bool rows;           // row granularity: indices are rows of `cols` values
  int64_t cols = 1;    // values per index
  int64_t k = 0;       // indices kept
  size_t values = 0;   // offset (floats) of this tensor's values in a rank's block
  size_t indices = 0;  // offset (int32) of its indices in a rank's block
};

}  // namespace

void TopK::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  const bool by_row = ctx.spec.granularity == "row";
  std::vector<CompressTensor*> dense;
  std::vector<Selection> selected;
  size_t value_count = 0, index_count = 0;
  begin_phase(ctx, "select", "compress");
  for (CompressTensor& t : bucket) {
    const MatrixView view = matrix_view(t.shape);
    const bool eligible = static_cast<int64_t>(t.elements) >= ctx.options.min_compress_elements &&
                          t.elements > 0 && (!by_row || view.usable);
    if (!eligible) {
      dense.push_back(&t);
      ++ctx.stats.dense_fallbacks;
      continue;
    }
    if (t.elements > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      throw Error("topk: tensor '" + t.name + "' has more than 2^31 elements");
    }
    Selection s{&t, by_row};
    const int64_t units = by_row ? view.rows : static_cast<int64_t>(t.elements);
    s.cols = by_row ? view.cols : 1;
    s.k = kept(ctx.spec.ratio, units);
    s.values = value_count;
    s.indices = index_count;
    value_count += static_cast<size_t>(s.k * s.cols);
    index_count += static_cast<size_t>(s.k);
    selected.push_back(s);
  }

  // By host, the host's first rank selects from the sum of its ranks' inputs and only the first
  // ranks send blocks; every rank's contribution is its own input on its host's selection, so
  // the host's contributions add up to the compressed host sum and each rank's error feedback
  // keeps what its host did not send (docs/design/communicators-several-ranks-per-host.md).
  const std::vector<int> hosts = ctx.comm.exchange_hosts();
  const int me = ctx.comm.rank(), world = ctx.comm.size();
  // Senders in rank order: every rank, or by host each host's first rank (a host's ranks need
  // not be numbered together; host indices are below the world size).
  std::vector<int> senders;
  int my_first = me;
  if (hosts.empty()) {
    for (int r = 0; r < world; ++r) senders.push_back(r);
  } else {
    std::vector<int> first_of(world, -1);  // by host
    for (int r = 0; r < world; ++r) {
      if (first_of[hosts[r]] >= 0) continue;
      first_of[hosts[r]] = r;
      senders.push_back(r);
    }
    my_first = first_of[hosts[me]];
  }
  std::vector<float> host_sum;
  if (!hosts.empty()) {
    size_t elements = 0;
    for (const Selection& s : selected) elements += s.t->elements;
    host_sum.resize(elements);
    size_t offset = 0;
    for (const Selection& s : selected) {
      std::memcpy(host_sum.data() + offset, s.t->input, s.t->elements * sizeof(float));
      offset += s.t->elements;
    }
    begin_phase(ctx, "host sum", "communicate");
    if (elements > 0) ctx.comm.reduce_within_host(host_sum.data(), elements);
    begin_phase(ctx, "select", "compress");
  }
  const bool sends = hosts.empty() || me == my_first;

  // This rank's block: values (fp32) then indices (int32); by host, the first ranks' only.
  const size_t block_bytes = value_count * sizeof(float) + index_count * sizeof(int32_t);
  std::vector<uint8_t> block(sends ? block_bytes : 0);
  auto* my_values = reinterpret_cast<float*>(block.data());
  auto* my_indices = reinterpret_cast<int32_t*>(block.data() + value_count * sizeof(float));
  std::vector<int64_t> idx;
  std::vector<float> scores;
  size_t sum_offset = 0;
  for (const Selection& s : selected) {
    if (!sends) break;
    CompressTensor& t = *s.t;
    const float* input = host_sum.empty() ? t.input : host_sum.data() + sum_offset;
    sum_offset += t.elements;
    idx.resize(static_cast<size_t>(s.k));
    if (s.rows) {
      const int64_t n = static_cast<int64_t>(t.elements) / s.cols;
      scores.resize(static_cast<size_t>(n));
      kernels::row_sq_norms(input, n, s.cols, scores.data());
      kernels::top_k_rows(scores.data(), n, s.k, idx.data());
      kernels::gather_rows(input, s.cols, idx.data(), s.k, my_values + s.values);
      ctx.stats.selected_rows += static_cast<uint64_t>(s.k);
    } else {
      kernels::top_k_abs(input, static_cast<int64_t>(t.elements), s.k, idx.data());
      kernels::gather(input, idx.data(), s.k, my_values + s.values);
    }
    for (int64_t i = 0; i < s.k; ++i) my_indices[s.indices + i] = static_cast<int32_t>(idx[i]);
    ctx.stats.value_bytes += static_cast<uint64_t>(s.k * s.cols) * sizeof(float);
    ctx.stats.index_bytes += static_cast<uint64_t>(s.k) * sizeof(int32_t);
  }

  std::vector<size_t> recv_bytes(world, 0);
  for (int r : senders) recv_bytes[r] = block_bytes;
  std::vector<uint8_t> all(block_bytes * senders.size());
  begin_phase(ctx, "values collective", "communicate");
  if (block_bytes && hosts.empty()) ctx.comm.allgather(block.data(), block_bytes, all.data());
  if (block_bytes && !hosts.empty()) ctx.comm.allgatherv(block.data(), all.data(), recv_bytes);
  begin_phase(ctx, "decompress", "decompress");
  const float inv_n = 1.0f / static_cast<float>(world);
  std::vector<float> own;
  for (const Selection& s : selected) {
    CompressTensor& t = *s.t;
    kernels::fill(t.output, t.elements, 0.0f);
    if (t.contribution) kernels::fill(t.contribution, t.elements, 0.0f);
    idx.resize(static_cast<size_t>(s.k * s.cols));
    for (size_t b = 0; b < senders.size(); ++b) {
      const uint8_t* base = all.data() + b * block_bytes;
      const auto* values = reinterpret_cast<const float*>(base) + s.values;
      const auto* indices =
          reinterpret_cast<const int32_t*>(base + value_count * sizeof(float)) + s.indices;
      // Expand row indices to element indices so one scatter_add handles both granularities.
      for (int64_t i = 0; i < s.k; ++i) {
        for (int64_t c = 0; c < s.cols; ++c) idx[i * s.cols + c] = indices[i] * s.cols + c;
      }
      kernels::scatter_add(values, idx.data(), s.k * s.cols, inv_n, t.output);
      if (senders[b] != my_first || !t.contribution) continue;
      if (hosts.empty()) {
        kernels::scatter(values, idx.data(), s.k * s.cols, t.contribution);
      } else {  // this rank's own values on its host's selection
        own.resize(static_cast<size_t>(s.k * s.cols));
        kernels::gather(t.input, idx.data(), s.k * s.cols, own.data());
        kernels::scatter(own.data(), idx.data(), s.k * s.cols, t.contribution);
      }
    }
  }
  if (!dense.empty()) begin_phase(ctx, "dense collective", "communicate");
  dense_mean(dense, ctx.comm);
}

// The factory its row in compressors.inc names.
std::unique_ptr<Compressor> make_topk() {
  return std::make_unique<TopK>();
}

}  // namespace arcreduce
