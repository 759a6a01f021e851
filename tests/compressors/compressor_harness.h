// Runs a compressor on every rank of a loopback world and collects each rank's outputs, plus
// naive references the compressor tests compare against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/logging.h"
#include "compressors/compressor.h"
#include "compressors/error_feedback.h"
#include "compressors/tensor_state.h"
#include "ops/loopback_communicator.h"
#include "runtime/compressor_config.h"

namespace arcreduce {
namespace testing {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  size_t elements() const {
    size_t n = 1;
    for (int64_t s : shape) n *= static_cast<size_t>(s);
    return n;
  }
};

struct RankResult {
  std::vector<std::vector<float>> output;        // per tensor
  std::vector<std::vector<float>> contribution;  // per tensor
};

using InputFn = std::function<float(int rank, size_t tensor, size_t element, int step)>;

// True when the float vectors hold the same bits (NaN and -0 included). memcmp() of an empty
// vector's data(), which may be null, is undefined even with a zero length: not called then.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline float smooth_input(int rank, size_t tensor, size_t i, int step) {
  // Distinct magnitudes (few ties), rank- and step-dependent.
  uint32_t h = static_cast<uint32_t>(i * 2654435761u + tensor * 40503u + rank * 97u + step * 7919u);
  return static_cast<float>(static_cast<int>(h % 20011u) - 10005) / 1000.0f;
}

// Runs `steps` reductions of `tensors` on `world` ranks; returns each rank's results of the last
// step. `ef` is "none", "ef14", "ef21" or "ef21m" (decorators share one StateStore per rank).
// ranks_per_host > 0: hosts of that many consecutive ranks exchanging by host (Hierarchy::kOn).
inline std::vector<RankResult> run_compressor(int world, const std::string& compressor,
                                              const CompressionSpec& spec, const Config& config,
                                              const std::vector<TensorSpec>& tensors,
                                              const InputFn& input, int steps = 1,
                                              std::vector<StateStore>* stores = nullptr,
                                              int ranks_per_host = 0) {
  std::vector<RankResult> results(world);
  std::vector<StateStore> local(world);
  std::vector<StateStore>& state = stores ? *stores : local;  // one store per rank
  const CompressorOptions options = compressor_options(config);
  LoopbackWorld loopback(world, ranks_per_host,
                         ranks_per_host > 0 ? Hierarchy::kOn : Hierarchy::kOff);
  run_ranks(loopback, [&](Communicator& comm) {
    const int rank = comm.rank();
    auto pipeline =
        with_error_feedback(make_compressor(compressor), spec.error_feedback, state[rank]);
    CompressorStats stats;
    Logger log = make_logger(rank, "error");
    RankResult& res = results[rank];
    for (int step = 0; step < steps; ++step) {
      std::vector<std::vector<float>> in(tensors.size());
      res.output.assign(tensors.size(), {});
      res.contribution.assign(tensors.size(), {});
      std::vector<CompressTensor> bucket(tensors.size());
      for (size_t t = 0; t < tensors.size(); ++t) {
        const size_t n = tensors[t].elements();
        in[t].resize(n);
        for (size_t i = 0; i < n; ++i) in[t][i] = input(rank, t, i, step);
        res.output[t].assign(n, std::nanf(""));
        res.contribution[t].assign(n, std::nanf(""));
        TensorState& s = state[rank].get(tensors[t].name, n);
        CompressTensor& c = bucket[t];
        c.name = tensors[t].name;
        c.shape = tensors[t].shape;
        c.elements = n;
        c.step = s.compressed_steps;
        c.input = in[t].data();
        c.output = res.output[t].data();
        c.contribution = res.contribution[t].data();
      }
      CompressContext ctx{comm, options, spec, stats, log, &state[rank]};
      pipeline->reduce(bucket, ctx);
      for (size_t t = 0; t < tensors.size(); ++t) {
        ++state[rank].get(tensors[t].name, tensors[t].elements()).compressed_steps;
      }
    }
  });
  return results;
}

// Indices of the k largest values (ties to the lower index), ascending.
inline std::vector<int64_t> naive_top_k(const std::vector<double>& score, int64_t k) {
  std::vector<int64_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return score[a] > score[b]; });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

// Rows (of `cols` values) that are not all zero.
inline std::vector<int64_t> nonzero_rows(const std::vector<float>& x, int64_t cols) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < static_cast<int64_t>(x.size()) / cols; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (x[r * cols + c] != 0.0f) {
        rows.push_back(r);
        break;
      }
    }
  }
  return rows;
}

}  // namespace testing
}  // namespace arcreduce
