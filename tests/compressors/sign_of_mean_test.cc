// A compressor added as every new one is: its own code plus one row of the compressors' registry.
// The code is the class and factory below; the row is added with register_compressor(), the way
// open to tests (a compressor of the library adds the same row to compressors/compressors.inc).
// Nothing else of the runtime names it, yet it is reduced through the runtime's real path
// (submission checks, negotiation, the step batcher, the executor, error feedback) and through
// the compressor harness, and both match a naive reference.
//
// Sign of mean: each rank sends the sign of every element of its tensor scaled by the tensor's
// mean magnitude, C_i(x) = sign(x) * mean_j |x_j| (scaled signSGD); the output is the mean of the
// ranks' C_i(x). The ratio does not size what it sends, so its row fixes the ratio at 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "compressors/compressor.h"
#include "compressors/registry.h"
#include "tests/compressors/compressor_harness.h"
#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace sign_of_mean_test {

// The compressor's own code.
class SignOfMean : public Compressor {
 public:
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override {
    size_t total = 0;
    for (const CompressTensor& t : bucket) total += t.elements;
    std::vector<float> sum(total);
    size_t at = 0;
    for (const CompressTensor& t : bucket) {  // every input is read before any output is written
      double magnitude = 0;
      for (size_t i = 0; i < t.elements; ++i) magnitude += std::fabs(t.input[i]);
      const float scale = t.elements ? static_cast<float>(magnitude / t.elements) : 0.0f;
      for (size_t i = 0; i < t.elements; ++i) {
        const float x = t.input[i];
        sum[at + i] = x > 0 ? scale : (x < 0 ? -scale : 0.0f);
      }
      if (t.contribution)
        std::copy(sum.begin() + at, sum.begin() + at + t.elements, t.contribution);
      at += t.elements;
    }
    if (total) ctx.comm.allreduce(sum.data(), total, ScalarType::kFloat32, CollectiveOp::kSum);
    ctx.stats.value_bytes += total * sizeof(float);
    const float inv_n = 1.0f / static_cast<float>(ctx.comm.size());
    at = 0;
    for (CompressTensor& t : bucket) {
      for (size_t i = 0; i < t.elements; ++i) t.output[i] = sum[at + i] * inv_n;
      at += t.elements;
    }
  }
};

// Its row: not dense (sparsity aside, the batching treats it as a compressor), any error feedback,
// its own ratio (none), no warm-up of its own, reduced on host copies of CUDA tensors.
const char* const kName = "sign_of_mean";

void register_once() {
  static const bool registered = [] {
    CompressorTraits row;
    row.name = kName;
    row.factory = []() -> std::unique_ptr<Compressor> { return std::make_unique<SignOfMean>(); };
    row.uses_ratio = false;
    register_compressor(row);
    return true;
  }();
  (void)registered;
}

float input(int rank, size_t tensor, size_t i, int step) {
  // Quarter steps in [-2, 2], zeros included: signs and magnitudes vary by rank and step.
  const int v = static_cast<int>((i * 37 + tensor * 3 + static_cast<size_t>(rank) * 11 +
                                  static_cast<size_t>(step) * 5) %
                                 17) -
                8;
  return 0.25f * static_cast<float>(v);
}

const std::vector<TensorSpec> kShapes = {{"w", {6, 5}}, {"b", {7}}, {"conv", {2, 3, 2}}};

// The naive reference in double: per step and tensor, the ranks' mean of sign(x) * mean |x|,
// with x = g + e and e = x - C_i(x) under ef14 (x = g without error feedback). out[step][tensor],
// and each rank's C_i(x) of the last step, own[rank][tensor].
struct Reference {
  std::vector<std::vector<std::vector<double>>> out;
  std::vector<std::vector<std::vector<double>>> own;
};
Reference reference(int world, int steps, bool ef14) {
  Reference ref;
  std::vector<std::vector<std::vector<double>>> e(world);  // [rank][tensor]
  for (int r = 0; r < world; ++r) {
    for (const TensorSpec& t : kShapes) e[r].emplace_back(t.elements(), 0.0);
  }
  ref.own.assign(world, {});
  for (int s = 0; s < steps; ++s) {
    ref.out.emplace_back();
    for (size_t t = 0; t < kShapes.size(); ++t) {
      const size_t n = kShapes[t].elements();
      std::vector<double> mean(n, 0.0);
      for (int r = 0; r < world; ++r) {
        std::vector<double> x(n);
        double magnitude = 0;
        for (size_t i = 0; i < n; ++i) {
          x[i] = input(r, t, i, s) + (ef14 ? e[r][t][i] : 0.0);
          magnitude += std::fabs(x[i]);
        }
        std::vector<double> c(n);
        for (size_t i = 0; i < n; ++i) {
          c[i] = x[i] > 0 ? magnitude / n : (x[i] < 0 ? -magnitude / n : 0.0);
          mean[i] += c[i] / world;
          if (ef14) e[r][t][i] = x[i] - c[i];
        }
        if (s == steps - 1) ref.own[r].push_back(c);
      }
      ref.out.back().push_back(mean);
    }
  }
  return ref;
}

constexpr double kTolerance = 1e-5;

TEST(SignOfMeanCompressor, OneRowMakesItKnown) {
  register_once();
  const CompressorTraits* row = find_compressor(kName);
  ASSERT_NE(row, nullptr);
  EXPECT_TRUE(compressor_available(kName));
  EXPECT_NE(make_compressor(kName), nullptr);
  EXPECT_FALSE(keeps_own_residual(kName));
  EXPECT_FALSE(row->dense);
  EXPECT_FALSE(row->uses_ratio);
  EXPECT_TRUE(row->takes_feedback("ef14"));
}

TEST(SignOfMeanCompressor, MatchesTheNaiveReferenceInTheHarness) {
  register_once();
  const int world = 3, steps = 3;
  for (const char* ef : {"none", "ef14"}) {
    const CompressionSpec spec{kName, 1.0, ef, ""};
    const auto got = run_compressor(world, kName, spec, Config{}, kShapes, input, steps);
    const Reference ref = reference(world, steps, std::string(ef) == "ef14");
    for (int r = 0; r < world; ++r) {
      for (size_t t = 0; t < kShapes.size(); ++t) {
        for (size_t i = 0; i < kShapes[t].elements(); ++i) {
          ASSERT_NEAR(got[r].output[t][i], ref.out[steps - 1][t][i], kTolerance)
              << ef << " rank " << r << " tensor " << t << " element " << i;
          ASSERT_NEAR(got[r].contribution[t][i], ref.own[r][t][i], kTolerance)
              << ef << " rank " << r << " tensor " << t << " element " << i;
        }
      }
    }
  }
}

// Through the whole runtime on a loopback world: the per-op option names the compressor, every
// rank asks a different ratio (its row fixes the ratio at 1, so the ranks still agree), and the
// error feedback wraps it as it wraps the library's compressors.
TEST(SignOfMeanCompressor, MatchesTheNaiveReferenceThroughTheRuntime) {
  register_once();
  const int world = 3, steps = 3;
  for (const char* ef : {"none", "ef14"}) {
    // got[rank][step][tensor]
    std::vector<std::vector<std::vector<std::vector<float>>>> got(world);
    run_runtimes(world, test_config(), [&](Runtime& rt, int rank) {
      AllreduceOptions options;
      options.compression.compressor = kName;
      options.compression.ratio = 0.1 * (rank + 1);
      options.compression.error_feedback = ef;
      for (int s = 0; s < steps; ++s) {
        std::vector<std::vector<float>> data(kShapes.size());
        std::vector<Handle> handles;
        for (size_t t = 0; t < kShapes.size(); ++t) {
          for (size_t i = 0; i < kShapes[t].elements(); ++i) {
            data[t].push_back(input(rank, t, i, s));
          }
          handles.push_back(rt.allreduce_async(
              kShapes[t].name, Tensor{data[t].data(), DType::kFloat32, kShapes[t].shape}, options));
        }
        for (Handle h : handles) {
          const Status status = rt.synchronize(h);
          EXPECT_TRUE(status.ok()) << status.message();
        }
        got[rank].push_back(data);
      }
      EXPECT_EQ(rt.stats().compressors.at(kName).tensors, kShapes.size() * steps);
    });
    const Reference ref = reference(world, steps, std::string(ef) == "ef14");
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(got[r].size(), static_cast<size_t>(steps));
      for (int s = 0; s < steps; ++s) {
        for (size_t t = 0; t < kShapes.size(); ++t) {
          for (size_t i = 0; i < kShapes[t].elements(); ++i) {
            ASSERT_NEAR(got[r][s][t][i], ref.out[s][t][i], kTolerance)
                << ef << " rank " << r << " step " << s << " tensor " << t << " element " << i;
          }
        }
      }
    }
  }
}

}  // namespace sign_of_mean_test
}  // namespace testing
}  // namespace arcreduce
