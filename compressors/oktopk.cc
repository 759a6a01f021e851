#include "compressors/oktopk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "compressors/dense_mean.h"
#include "compressors/kernels/kernels.h"
#include "compressors/oktopk_exchange.h"
#include "compressors/oktopk_rules.h"

namespace arcreduce {
namespace {

constexpr int kReduceTag = 3170;   // split-and-reduce messages
constexpr int kBalanceTag = 3171;  // phase-2 rebalancing messages
constexpr int kMaxInFlight = 4;    // rotated steps posted ahead (the paper's constant)

// Names of Ok-Topk's entries in TensorState (docs/compressors.md, "State files").
constexpr const char* kResidual = "oktopk.residual";      // floats, n
constexpr const char* kCalls = "oktopk.calls";            // int64s, {t}
constexpr const char* kBoundaries = "oktopk.boundaries";  // int64s, off[0..P]
constexpr const char* kLocalThreshold = "oktopk.lthr";    // doubles, {lthr} once set
constexpr const char* kGlobalThreshold = "oktopk.gthr";   // doubles, {gthr} once set

// Wire record: an index (int32, int64 when some tensor of the bucket exceeds 2^31 - 1
// entries), then the fp32 value. Split and reduce sends region-relative indices, the
// All-Gather tensor-relative ones.
class Records {
 public:
  explicit Records(bool wide) : index_bytes_(wide ? sizeof(int64_t) : sizeof(int32_t)) {}
  size_t index_bytes() const { return index_bytes_; }
  size_t bytes() const { return index_bytes_ + sizeof(float); }
  uint8_t* put(uint8_t* at, int64_t index, float value) const {
    if (index_bytes_ == sizeof(int64_t)) {
      std::memcpy(at, &index, sizeof(int64_t));
    } else {
      const auto narrow = static_cast<int32_t>(index);
      std::memcpy(at, &narrow, sizeof(int32_t));
    }
    std::memcpy(at + index_bytes_, &value, sizeof(float));
    return at + bytes();
  }
  const uint8_t* get(const uint8_t* at, int64_t* index, float* value) const {
    if (index_bytes_ == sizeof(int64_t)) {
      std::memcpy(index, at, sizeof(int64_t));
    } else {
      int32_t narrow;
      std::memcpy(&narrow, at, sizeof(int32_t));
      *index = narrow;
    }
    std::memcpy(value, at + index_bytes_, sizeof(float));
    return at + bytes();
  }

 private:
  size_t index_bytes_;
};

// One tensor on the sparse path during one call.
struct Work {
  CompressTensor* tensor;
  TensorState* state;
  float* acc;  // = the residual buffer, holding g + residual until step 8
  int64_t n, k, calls;
  bool exact_global, repartition;
  std::vector<int64_t> selection;  // L, ascending
  std::vector<int64_t> off;        // region boundaries of this call
  std::vector<int64_t> picks;      // per region: entries of L in it
  std::vector<float> sum;          // own region: sum of every rank's picks
  std::vector<uint8_t> touched;    // own region: some rank picked the entry
  std::vector<oktopk::Entry> survivors;
};

[[noreturn]] void corrupted(const std::string& what) {
  throw Error("oktopk: " + what, StatusCode::kInternal);
}

// Steps 1, 2 and 4 for one tensor: acc = g + residual, the local selection, and the local
// threshold of the next call.
void select_locally(Work& w, const OkTopKOptions& options) {
  std::vector<double>& lthr = w.state->doubles[kLocalThreshold];
  // Density 1 (k = n) keeps every entry: exact on every call, so it equals the dense mean.
  const bool exact = lthr.empty() || w.calls % options.tau_prime == 0 || w.k >= w.n;
  double threshold = 0.0;
  if (exact) {
    w.selection = oktopk::exact_local_selection(w.acc, w.n, w.k, &threshold);
  } else {
    threshold = oktopk::raise_local_threshold(w.acc, w.n, w.k, lthr[0]);
    w.selection = oktopk::above(w.acc, w.n, threshold);
  }
  lthr = {oktopk::nudge_local_threshold(threshold, static_cast<int64_t>(w.selection.size()), w.k)};
}

// Step 3 for every tensor of the bucket at once: one int64 sum All-Reduce of
// [voter flag, P - 1 candidates] per repartitioning tensor; then everyone's boundaries.
void agree_on_regions(std::vector<Work>& work, Communicator& comm) {
  const int ranks = comm.size();
  std::vector<int64_t> votes;
  for (Work& w : work) {
    if (!w.repartition) continue;
    const std::vector<int64_t> candidates = oktopk::boundary_candidates(w.selection, ranks);
    votes.push_back(candidates.empty() ? 0 : 1);
    for (int j = 1; j < ranks; ++j) votes.push_back(candidates.empty() ? 0 : candidates[j - 1]);
  }
  if (!votes.empty())
    comm.allreduce(votes.data(), votes.size(), ScalarType::kInt64, CollectiveOp::kSum);
  size_t at = 0;
  for (Work& w : work) {
    std::vector<int64_t>& stored = w.state->int64s[kBoundaries];
    if (w.repartition) {
      const std::vector<int64_t> sums(votes.begin() + at + 1, votes.begin() + at + ranks);
      stored = oktopk::agreed_boundaries(sums, votes[at], stored, w.n, ranks);
      at += ranks;
    } else if (stored.size() != static_cast<size_t>(ranks) + 1 || stored.back() != w.n) {
      stored = oktopk::even_boundaries(w.n, ranks);
    }
    w.off = stored;
  }
}

// Step 5: counts exchange, then the rotated messages, summed into each rank's own region.
// Returns the records this rank sent to others.
int64_t split_and_reduce(std::vector<Work>& work, const Records& rec, Communicator& comm) {
  const int ranks = comm.size(), rank = comm.rank();
  const size_t tensors = work.size();
  std::vector<int64_t> counts(ranks * tensors), received(ranks * tensors);
  for (size_t t = 0; t < tensors; ++t) {
    Work& w = work[t];
    w.picks.assign(ranks, 0);
    auto from = w.selection.begin();
    for (int d = 0; d < ranks; ++d) {
      auto to = std::lower_bound(from, w.selection.end(), w.off[d + 1]);
      w.picks[d] = to - from;
      counts[d * tensors + t] = w.picks[d];
      from = to;
    }
  }
  const std::vector<size_t> count_bytes(ranks, tensors * sizeof(int64_t));
  comm.alltoallv(counts.data(), count_bytes, received.data(), count_bytes);

  std::vector<size_t> send_bytes(ranks, 0), recv_bytes(ranks, 0);
  for (int q = 0; q < ranks; ++q) {
    for (size_t t = 0; t < tensors; ++t) {
      if (received[q * tensors + t] < 0) corrupted("negative count received");
      recv_bytes[q] += static_cast<size_t>(received[q * tensors + t]) * rec.bytes();
      send_bytes[q] += static_cast<size_t>(counts[q * tensors + t]) * rec.bytes();
    }
  }
  send_bytes[rank] = recv_bytes[rank] = 0;
  size_t total = 0;
  for (size_t b : send_bytes) total += b;
  std::vector<uint8_t> packed(total);
  uint8_t* at = packed.data();
  for (int d = 0; d < ranks; ++d) {
    for (Work& w : work) {
      const int64_t first =
          std::lower_bound(w.selection.begin(), w.selection.end(), w.off[d]) - w.selection.begin();
      for (int64_t j = first; j < first + w.picks[d]; ++j) {
        const int64_t i = w.selection[j];
        if (d == rank) {  // own picks go straight into the sum
          w.sum[i - w.off[d]] += w.acc[i];
          w.touched[i - w.off[d]] = 1;
        } else {
          at = rec.put(at, i - w.off[d], w.acc[i]);
        }
      }
    }
  }
  oktopk::rotated_exchange(comm, packed.data(), send_bytes, recv_bytes, kReduceTag, kMaxInFlight,
                           [&](int src, const uint8_t* data, size_t) {
                             for (size_t t = 0; t < tensors; ++t) {
                               Work& w = work[t];
                               const auto length = static_cast<int64_t>(w.sum.size());
                               for (int64_t j = 0; j < received[src * tensors + t]; ++j) {
                                 int64_t index;
                                 float value;
                                 data = rec.get(data, &index, &value);
                                 if (index < 0 || index >= length)
                                   corrupted("region index out of range");
                                 w.sum[index] += value;
                                 w.touched[index] = 1;
                               }
                             }
                           });
  return static_cast<int64_t>(total / rec.bytes());
}

// Step 6: this rank's survivors, one All-Gather of their counts and one All-Gather(v) of the
// records; every rank then holds every tensor's survivors in the same order. Returns the
// records this rank contributed.
int64_t gather_survivors(std::vector<Work>& work, const Records& rec, bool balance,
                         Communicator& comm) {
  const int ranks = comm.size(), rank = comm.rank();
  const size_t tensors = work.size();
  std::vector<int64_t> mine(tensors, 0);
  std::vector<uint8_t> block;
  for (size_t t = 0; t < tensors; ++t) {
    Work& w = work[t];
    const std::vector<double>& gthr = w.state->doubles[kGlobalThreshold];
    for (size_t j = 0; j < w.sum.size(); ++j) {
      const float v = w.sum[j];
      if (!w.touched[j] || !(v != 0.0f)) continue;
      if (!w.exact_global && !(std::fabs(static_cast<double>(v)) > gthr[0])) continue;
      block.resize(block.size() + rec.bytes());
      rec.put(block.data() + block.size() - rec.bytes(), w.off[rank] + static_cast<int64_t>(j), v);
      ++mine[t];
    }
  }
  std::vector<int64_t> counts(ranks * tensors);
  comm.allgather(mine.data(), tensors * sizeof(int64_t), counts.data());
  std::vector<size_t> block_bytes(ranks, 0);
  size_t total = 0;
  for (int q = 0; q < ranks; ++q) {
    for (size_t t = 0; t < tensors; ++t) {
      if (counts[q * tensors + t] < 0) corrupted("negative survivor count");
      block_bytes[q] += static_cast<size_t>(counts[q * tensors + t]) * rec.bytes();
    }
    total += block_bytes[q];
  }
  std::vector<uint8_t> all(total);
  oktopk::gather_blocks(comm, block.data(), block_bytes, rec.bytes(), balance, kBalanceTag,
                        all.data());
  const uint8_t* at = all.data();
  for (int q = 0; q < ranks; ++q) {
    for (size_t t = 0; t < tensors; ++t) {
      Work& w = work[t];
      for (int64_t j = 0; j < counts[q * tensors + t]; ++j) {
        oktopk::Entry e{};
        at = rec.get(at, &e.index, &e.value);
        if (e.index < w.off[q] || e.index >= w.off[q + 1]) corrupted("survivor outside its region");
        w.survivors.push_back(e);
      }
    }
  }
  return static_cast<int64_t>(block.size() / rec.bytes());
}

// Steps 6 (global threshold), 7 and 8 for one tensor.
void finish(Work& w, int ranks) {
  std::vector<double>& gthr = w.state->doubles[kGlobalThreshold];
  if (w.exact_global) {
    if (!w.survivors.empty()) {  // an empty union keeps the previous threshold
      double kth = 0.0;
      w.survivors = oktopk::exact_global_selection(std::move(w.survivors), w.k, &kth);
      gthr = {kth};
    }
  } else {
    gthr = {oktopk::nudge_global_threshold(gthr[0], static_cast<int64_t>(w.survivors.size()), w.k)};
  }
  CompressTensor& t = *w.tensor;
  kernels::fill(t.output, t.elements, 0.0f);
  if (t.contribution) kernels::fill(t.contribution, t.elements, 0.0f);
  const float inv = 1.0f / static_cast<float>(ranks);
  for (const oktopk::Entry& e : w.survivors) {
    t.output[e.index] = e.value * inv;
    // This rank's pick of a survivor has been delivered: it leaves the residual.
    if (std::binary_search(w.selection.begin(), w.selection.end(), e.index)) {
      if (t.contribution) t.contribution[e.index] = w.acc[e.index];
      w.acc[e.index] = 0.0f;
    }
  }
  w.state->int64s[kCalls] = {w.calls + 1};
}

}  // namespace

void OkTopK::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  if (ctx.state == nullptr) throw Error("oktopk: no compressor state store in the context");
  const OkTopKOptions& options = ctx.options.oktopk;
  if (options.tau < 1 || options.tau_prime < 1) {
    throw Error("oktopk: ARCREDUCE_OKTOPK_TAU and ARCREDUCE_OKTOPK_TAU_PRIME must be >= 1");
  }
  const int ranks = ctx.comm.size();
  std::vector<Work> work;
  std::vector<CompressTensor> dense;
  std::vector<std::vector<float>> dense_inputs;
  dense.reserve(bucket.size());
  dense_inputs.reserve(bucket.size());
  bool wide = false;
  begin_phase(ctx, "select", "compress");
  for (CompressTensor& t : bucket) {
    TensorState& s = ctx.state->get(t.name, t.elements);
    std::vector<float>& residual = s.floats[kResidual];
    const auto n = static_cast<int64_t>(t.elements);
    const int64_t k = oktopk::kept_entries(ctx.spec.ratio, n);
    if (ranks == 1 || n < ctx.options.min_compress_elements || k < ranks) {
      // Exact mean of g plus whatever residual an earlier configuration left.
      dense.push_back(t);
      if (residual.size() == t.elements) {
        dense_inputs.emplace_back(t.input, t.input + t.elements);
        kernels::axpby(1.0f, residual.data(), 1.0f, dense_inputs.back().data(), t.elements);
        dense.back().input = dense_inputs.back().data();
      }
      s.floats.erase(kResidual);
      ++ctx.stats.dense_fallbacks;
      continue;
    }
    if (residual.size() != t.elements) residual.assign(t.elements, 0.0f);
    kernels::axpby(1.0f, t.input, 1.0f, residual.data(), t.elements);  // step 1
    const std::vector<int64_t>& calls = s.int64s[kCalls];
    Work w{&t, &s, residual.data(), n, k, calls.empty() ? 0 : calls[0]};
    w.exact_global =
        s.doubles[kGlobalThreshold].empty() || w.calls % options.tau_prime == 0 || k >= n;
    w.repartition = w.calls % options.tau == 0;
    select_locally(w, options);
    wide |= n > std::numeric_limits<int32_t>::max();
    work.push_back(std::move(w));
  }
  std::vector<CompressTensor*> dense_ptrs;
  for (CompressTensor& t : dense) dense_ptrs.push_back(&t);
  if (!dense_ptrs.empty()) begin_phase(ctx, "dense collective", "communicate");
  dense_mean(dense_ptrs, ctx.comm);
  for (CompressTensor& t : dense) ctx.stats.value_bytes += t.elements * sizeof(float);
  if (work.empty()) return;

  begin_phase(ctx, "regions collective", "communicate");
  agree_on_regions(work, ctx.comm);
  for (Work& w : work) {
    const auto length = static_cast<size_t>(w.off[ctx.comm.rank() + 1] - w.off[ctx.comm.rank()]);
    w.sum.assign(length, 0.0f);
    w.touched.assign(length, 0);
  }
  const Records rec(wide);
  begin_phase(ctx, "reduce-scatter", "communicate");
  const int64_t sent = split_and_reduce(work, rec, ctx.comm);
  begin_phase(ctx, "values collective", "communicate");
  const int64_t gathered = gather_survivors(work, rec, options.rebalance, ctx.comm);
  begin_phase(ctx, "decompress", "decompress");
  ctx.stats.value_bytes += static_cast<uint64_t>(sent + gathered) * sizeof(float);
  ctx.stats.index_bytes += static_cast<uint64_t>(sent + gathered) * rec.index_bytes();
  for (Work& w : work) finish(w, ranks);
}

// The factory its row in compressors.inc names.
std::unique_ptr<Compressor> make_oktopk() {
  return std::make_unique<OkTopK>();
}

}  // namespace arcreduce
