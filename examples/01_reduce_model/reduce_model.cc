// 01_reduce_model: averages the gradients of a ~24M-parameter transformer across ranks the way
// a training framework would, through arcreduce's public API only.
//
// Each step every rank fills its gradients with known per-rank values, hands each tensor to
// allreduce_async in reverse layer order (the order backward produces them), synchronizes all
// handles, and checks the results against the mean it can compute itself. Rank 0 prints one
// line per step and a summary of arcreduce::stats(). Exit status: 0 when every rank verified
// every step, 1 when not, 2 on a bad command line or configuration.
//
//   mpirun -np 4 ./reduce_model --steps 5 --compressor none
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <arcreduce/arcreduce.h>
#include <CLI/CLI.hpp>

namespace {

struct Parameter {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> grad;
};

// The model, in forward order: a 8192x384 token embedding and 12 pre-LayerNorm blocks of hidden
// 384 (fused QKV projection, output projection, 4x MLP, biases, two LayerNorms each).
std::vector<Parameter> build_model() {
  constexpr int64_t kVocab = 8192, kHidden = 384, kBlocks = 12;
  std::vector<Parameter> params;
  auto linear = [&params](const std::string& name, int64_t in, int64_t out) {
    params.push_back({name + ".weight", {in, out}, {}});
    params.push_back({name + ".bias", {out}, {}});
  };
  auto layer_norm = [&params](const std::string& name, int64_t width) {
    params.push_back({name + ".weight", {width}, {}});
    params.push_back({name + ".bias", {width}, {}});
  };
  params.push_back({"embedding.weight", {kVocab, kHidden}, {}});
  for (int64_t b = 0; b < kBlocks; ++b) {
    const std::string block = "blocks." + std::to_string(b);
    layer_norm(block + ".ln1", kHidden);
    linear(block + ".attn.qkv", kHidden, 3 * kHidden);
    linear(block + ".attn.proj", kHidden, kHidden);
    layer_norm(block + ".ln2", kHidden);
    linear(block + ".mlp.fc1", kHidden, 4 * kHidden);
    linear(block + ".mlp.fc2", 4 * kHidden, kHidden);
  }
  for (Parameter& p : params) {
    int64_t n = 1;
    for (int64_t dim : p.shape) n *= dim;
    p.grad.resize(static_cast<size_t>(n));
  }
  return params;
}

// Gradient value of element j of parameter i at `step` on `rank`: a pattern shared by all ranks
// (multiples of 1/16, exact in fp32) plus the rank, so the mean is pattern + (size - 1) / 2.
float pattern(size_t i, size_t j, int step) {
  return static_cast<float>((i * 31 + j * 7 + static_cast<size_t>(step)) % 64) / 16.0f;
}

void fill(std::vector<Parameter>& params, int step, int rank) {
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<float>& g = params[i].grad;
    for (size_t j = 0; j < g.size(); ++j) g[j] = pattern(i, j, step) + static_cast<float>(rank);
  }
}

// Element-wise tolerance (relative) for compressors whose average should match the exact mean;
// a negative value marks lossy compressors (sparsifiers, low rank), which are not checked
// element-wise: their average differs from the mean by design.
double tolerance(const std::string& compressor) {
  if (compressor == "none") return 1e-6;
  if (compressor == "fp16") return 4e-3;
  return -1;
}

struct Check {
  int64_t wrong = 0;       // values outside the tolerance (or failed ops' elements)
  double error_norm2 = 0;  // squared L2 distance to the exact mean
  double expected_norm2 = 0;
};

Check verify(const std::vector<Parameter>& params, int step, int size, double tol) {
  Check check;
  const float offset = static_cast<float>(size - 1) / 2;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float>& g = params[i].grad;
    for (size_t j = 0; j < g.size(); ++j) {
      const double expected = pattern(i, j, step) + offset;
      const double diff = g[j] - expected;
      check.error_norm2 += diff * diff;
      check.expected_norm2 += expected * expected;
      if (!std::isfinite(g[j]) || (tol >= 0 && std::abs(diff) > tol * std::max(1.0, expected))) {
        ++check.wrong;
      }
    }
  }
  return check;
}

// Submits every gradient, last layer first, and waits for all; returns failed ops.
int reduce(std::vector<Parameter>& params) {
  std::vector<arcreduce::Handle> handles;
  for (auto p = params.rbegin(); p != params.rend(); ++p) {
    arcreduce::Tensor tensor{p->grad.data(), arcreduce::DType::kFloat32, p->shape};
    handles.push_back(arcreduce::allreduce_async(p->name, tensor));
  }
  int failed = 0;
  for (arcreduce::Handle h : handles) {
    const arcreduce::Status status = arcreduce::synchronize(h);
    if (!status.ok() && failed++ == 0) {
      std::fprintf(stderr, "rank %d: %s\n", arcreduce::rank(), status.message().c_str());
    }
  }
  return failed;
}

// Tensors this rank reduced densely although `compressor` was asked (e.g. too small to compress).
uint64_t dense_fallbacks(const std::string& compressor) {
  const arcreduce::Stats stats = arcreduce::stats();
  const auto it = stats.compressors.find(compressor);
  return it == stats.compressors.end() ? 0 : it->second.dense_fallbacks;
}

// Sums `value` over ranks through arcreduce itself (dense, exact for small integers).
double sum_over_ranks(const std::string& name, double value) {
  arcreduce::AllreduceOptions options;
  options.op = arcreduce::ReduceOp::kSum;
  options.compression.compressor = "none";
  arcreduce::allreduce(name, arcreduce::Tensor{&value, arcreduce::DType::kFloat64, {1}}, options);
  return value;
}

void print_summary(const arcreduce::Stats& s, int steps, size_t tensors, double bytes,
                   double median_seconds) {
  std::printf("\nsummary over %d steps (rank 0's counters):\n", steps);
  std::printf("  per step       %zu tensors, %.2f MB, median %.3f s, %.2f GB/s\n", tensors,
              bytes / 1e6, median_seconds, bytes / median_seconds / 1e9);
  std::printf("  ops            %llu completed, %llu failed\n",
              static_cast<unsigned long long>(s.ops_completed),
              static_cast<unsigned long long>(s.ops_failed));
  std::printf("  negotiation    %llu cycles, %llu full, %llu cache hits, %.3f s\n",
              static_cast<unsigned long long>(s.cycles),
              static_cast<unsigned long long>(s.full_negotiations),
              static_cast<unsigned long long>(s.cache_hits), s.negotiation_seconds);
  std::printf("  buckets        %llu (%.1f per step)\n", static_cast<unsigned long long>(s.buckets),
              static_cast<double>(s.buckets) / steps);
  std::printf("  copy           %.3f s\n", s.copy_seconds);
  std::printf("  communication  %.3f s, %.2f MB sent, %.2f MB received\n", s.communication_seconds,
              static_cast<double>(s.bytes_sent) / 1e6, static_cast<double>(s.bytes_received) / 1e6);
  for (const auto& [name, c] : s.compressors) {
    std::printf("  compressor %-10s %llu tensors, %.2f MB sent, %llu reduced densely\n",
                name.c_str(), static_cast<unsigned long long>(c.tensors),
                static_cast<double>(c.bytes_sent) / 1e6,
                static_cast<unsigned long long>(c.dense_fallbacks));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 5;
  std::string compressor;
  CLI::App app("Average a 24M-parameter model's gradients across ranks with arcreduce.");
  app.add_option("--steps", steps, "training steps to simulate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--compressor", compressor,
                 "none, fp16, topk, randk, arctopk, oktopk, powersgd "
                 "(default: ARCREDUCE_COMPRESSOR, else the runtime's default)");
  CLI11_PARSE(app, argc, argv);

  arcreduce::Config config;
  try {
    config = arcreduce::Config::from_env();
    if (!compressor.empty()) config.compressor = compressor;
    arcreduce::init(config);
  } catch (const arcreduce::Error& e) {
    std::fprintf(stderr, "reduce_model: %s\n", e.what());
    return 2;
  }
  const int rank = arcreduce::rank(), size = arcreduce::size();
  const bool lead = rank == 0;

  std::vector<Parameter> params = build_model();
  double bytes = 0;
  for (const Parameter& p : params) bytes += static_cast<double>(p.grad.size() * sizeof(float));
  const double tol = tolerance(config.compressor);
  if (lead) {
    std::printf(
        "reduce_model: %d ranks, %zu tensors, %.2f MB of fp32 gradients per step, "
        "compressor %s\n",
        size, params.size(), bytes / 1e6, config.compressor.c_str());
  }

  std::vector<double> step_seconds;
  int64_t wrong = 0;
  int checked_steps = 0;  // steps compared element-wise with the exact mean
  for (int step = 0; step < steps; ++step) {
    fill(params, step, rank);
    const uint64_t dense_before = dense_fallbacks(config.compressor);
    const auto start = std::chrono::steady_clock::now();
    const int failed = reduce(params);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    step_seconds.push_back(seconds);
    // A lossy compressor that reduced every tensor densely must have produced the exact mean.
    const bool all_dense = dense_fallbacks(config.compressor) - dense_before == params.size();
    const double step_tol = tol >= 0 ? tol : (all_dense ? tolerance("none") : -1);
    const Check check = verify(params, step, size, step_tol);
    wrong += check.wrong + failed;
    checked_steps += step_tol >= 0;
    if (lead) {
      double total_seconds = 0;
      for (double t : step_seconds) total_seconds += t;
      const double eta = (steps - step - 1) * total_seconds / (step + 1);
      std::printf("step %d/%d  %.3f s  %.2f GB/s  ETA %.1f s  rank 0: %s, rel. error %.2e\n",
                  step + 1, steps, seconds, bytes / seconds / 1e9, eta,
                  check.wrong + failed ? "WRONG"
                  : tol >= 0           ? "verified"
                  : step_tol >= 0      ? "verified (all reduced densely)"
                                       : "not checked (lossy)",
                  std::sqrt(check.error_norm2 / check.expected_norm2));
      std::fflush(stdout);
    }
  }

  const arcreduce::Stats stats = arcreduce::stats();
  const double total_wrong = sum_over_ranks("reduce_model.wrong", static_cast<double>(wrong));
  if (lead) {
    std::vector<double> sorted = step_seconds;
    std::sort(sorted.begin(), sorted.end());
    print_summary(stats, steps, params.size(), bytes, sorted[sorted.size() / 2]);
    if (total_wrong == 0 && checked_steps == steps) {
      std::printf(
          "\nverification: all %d ranks completed every op and matched the exact mean "
          "in all %d steps\n",
          size, steps);
    } else if (total_wrong == 0) {
      std::printf(
          "\nverification: all %d ranks completed every op; %d of %d steps matched the "
          "exact mean, the other %d used a lossy compressor (not compared)\n",
          size, checked_steps, steps, steps - checked_steps);
    } else {
      std::printf("\nverification FAILED: %.0f wrong values or failed ops over all ranks\n",
                  total_wrong);
    }
  }
  arcreduce::shutdown();
  return total_wrong == 0 ? 0 : 1;
}
