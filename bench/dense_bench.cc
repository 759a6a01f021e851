// dense_bench: the runtime's dense path against raw MPI on one gradient set.
//
//   A  arcreduce: allreduce_async of every tensor in backward order, then synchronize all
//      (compressor "none", op kSum, fusion as configured by ARCREDUCE_*)
//   B  one raw MPI_Allreduce(MPI_SUM) of a contiguous buffer holding the same bytes (perfect
//      fusion, no negotiation; not necessarily the fastest: MPI picks its algorithm by size)
//   C  one raw MPI_Allreduce per tensor (what a framework without a runtime does)
//
// Variants run interleaved (A B C A B C ...) after warm-up rounds, each from a barrier; a
// sample is the slowest rank's time. Buffers are refilled before each sample and the sums are
// checked after it. Rank 0 prints the table; the program exits 0 unless a result is wrong.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <arcreduce/arcreduce.h>
#include <CLI/CLI.hpp>

#include "bench/gradient_sets.h"
#include "bench/report.h"

namespace ab = arcreduce::bench;

namespace {

struct Flags {
  std::string set = "tiny-transformer-24M";
  int repetitions = 10;
  int warmup = 2;
  std::string commit = "unknown";
};

// arcreduce's counters over the timed A rounds (differences of snapshots around each round).
struct RuntimeTotals {
  double buckets = 0, negotiation = 0, copy = 0, communication = 0, bytes_sent = 0;
  void add(const arcreduce::Stats& before, const arcreduce::Stats& after) {
    buckets += static_cast<double>(after.buckets - before.buckets);
    negotiation += after.negotiation_seconds - before.negotiation_seconds;
    copy += after.copy_seconds - before.copy_seconds;
    communication += after.communication_seconds - before.communication_seconds;
    bytes_sent += static_cast<double>(after.bytes_sent - before.bytes_sent);
  }
};

struct Buffers {
  std::vector<std::vector<float>> per_tensor;  // A and C
  std::vector<float> fused;                    // B
};

double run_arcreduce(const ab::GradientSet& set, Buffers& buffers) {
  arcreduce::AllreduceOptions options;
  options.op = arcreduce::ReduceOp::kSum;
  std::vector<arcreduce::Handle> handles;
  handles.reserve(set.tensors.size());
  const double start = MPI_Wtime();
  for (size_t i = 0; i < set.tensors.size(); ++i) {
    arcreduce::Tensor tensor{buffers.per_tensor[i].data(), arcreduce::DType::kFloat32,
                             set.tensors[i].shape};
    handles.push_back(arcreduce::allreduce_async(set.tensors[i].name, tensor, options));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    const arcreduce::Status status = arcreduce::synchronize(handles[i]);
    if (!status.ok()) {
      std::fprintf(stderr, "dense_bench: %s failed: %s\n", set.tensors[i].name.c_str(),
                   status.message().c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  return MPI_Wtime() - start;
}

double run_fused(Buffers& buffers) {
  const double start = MPI_Wtime();
  MPI_Allreduce(MPI_IN_PLACE, buffers.fused.data(), static_cast<int>(buffers.fused.size()),
                MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return MPI_Wtime() - start;
}

double run_per_tensor(Buffers& buffers) {
  const double start = MPI_Wtime();
  for (std::vector<float>& t : buffers.per_tensor) {
    MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  return MPI_Wtime() - start;
}

// Fills every buffer with `value` (rank + 1, so that every sum is size * (size + 1) / 2).
void fill(Buffers& buffers, float value) {
  for (std::vector<float>& t : buffers.per_tensor) std::fill(t.begin(), t.end(), value);
  std::fill(buffers.fused.begin(), buffers.fused.end(), value);
}

int64_t count_wrong(const std::vector<float>& values, float expected) {
  return std::count_if(values.begin(), values.end(), [&](float v) { return v != expected; });
}

void print_table(const ab::GradientSet& set, const Flags& flags, int ranks,
                 const arcreduce::Config& config, const std::vector<std::vector<double>>& times,
                 const RuntimeTotals& totals) {
  const double bytes = static_cast<double>(set.elements()) * sizeof(float);
  const char* names[] = {"A arcreduce allreduce_async + synchronize",
                         "B raw MPI_Allreduce, one fused buffer", "C raw MPI_Allreduce per tensor"};
  std::vector<ab::Summary> s;
  for (const std::vector<double>& t : times) s.push_back(ab::summarize(t));
  std::printf("dense_bench  %s\n", ab::utc_now().c_str());
  std::printf("commit       %s\n", flags.commit.c_str());
  std::printf("machine      %s\n", ab::machine_description().c_str());
  std::printf("mpi          %s\n", ab::mpi_library().c_str());
  std::printf("ranks        %d, one host (link: local shared memory)\n", ranks);
  std::printf("tensor set   %s: %zu fp32 tensors, %lld elements, %.2f MB\n", set.name.c_str(),
              set.tensors.size(), static_cast<long long>(set.elements()), bytes / 1e6);
  std::printf("arcreduce    compressor none, op sum, fusion threshold %lld B, cycle %.2f ms\n",
              static_cast<long long>(config.fusion_threshold), config.cycle_time_ms);
  std::printf("repetitions  %d (+%d warm-up), interleaved A B C, slowest rank from a barrier\n\n",
              flags.repetitions, flags.warmup);
  std::printf("%-44s %10s %10s %10s %8s %8s\n", "variant", "median ms", "p90 ms", "min ms", "GB/s",
              "/ B");
  for (size_t v = 0; v < s.size(); ++v) {
    std::printf("%-44s %10.1f %10.1f %10.1f %8.2f %8.3f\n", names[v], s[v].median * 1e3,
                s[v].p90 * 1e3, s[v].min * 1e3, bytes / s[v].median / 1e9,
                s[v].median / s[1].median);
  }
  std::printf("\nA/B = %.3f (target <= 1.10)   A/C = %.3f (target < 1)\n",
              s[0].median / s[1].median, s[0].median / s[2].median);
  const double runs = flags.repetitions;
  std::printf(
      "A on rank 0, mean per round: %.1f buckets, %.1f ms negotiation, %.1f ms copy, "
      "%.1f ms communication, %.1f MB sent\n",
      totals.buckets / runs, totals.negotiation / runs * 1e3, totals.copy / runs * 1e3,
      totals.communication / runs * 1e3, totals.bytes_sent / runs / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);

  Flags flags;
  CLI::App app("Dense reduction: arcreduce vs raw MPI_Allreduce (fused and per tensor).");
  app.add_option("--set", flags.set, "gradient set")->capture_default_str();
  app.add_option("--repetitions", flags.repetitions, "timed rounds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", flags.warmup, "untimed rounds first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--commit", flags.commit, "commit id printed in the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    MPI_Finalize();
    return code;
  }

  ab::GradientSet set;
  arcreduce::Config config;
  try {
    set = ab::gradient_set(flags.set);
    config = arcreduce::Config::from_env();
    config.compressor = "none";
    arcreduce::init(config);  // MPI is initialised: arcreduce leaves finalising it to us
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "dense_bench: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }

  Buffers buffers;
  for (const ab::TensorSpec& t : set.tensors) {
    buffers.per_tensor.emplace_back(static_cast<size_t>(t.elements()));
  }
  buffers.fused.resize(static_cast<size_t>(set.elements()));
  const float value = static_cast<float>(rank + 1);
  const float expected = static_cast<float>(ranks * (ranks + 1) / 2);

  std::vector<std::vector<double>> times(3);
  RuntimeTotals totals;
  int64_t wrong = 0;
  for (int round = -flags.warmup; round < flags.repetitions; ++round) {
    for (int variant = 0; variant < 3; ++variant) {
      fill(buffers, value);
      MPI_Barrier(MPI_COMM_WORLD);
      const arcreduce::Stats before = arcreduce::stats();
      double seconds = variant == 0   ? run_arcreduce(set, buffers)
                       : variant == 1 ? run_fused(buffers)
                                      : run_per_tensor(buffers);
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (round >= 0) {
        times[variant].push_back(seconds);
        if (variant == 0) totals.add(before, arcreduce::stats());
      }
      if (variant == 1) {
        wrong += count_wrong(buffers.fused, expected);
      } else {
        for (const std::vector<float>& t : buffers.per_tensor) wrong += count_wrong(t, expected);
      }
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);

  if (rank == 0) print_table(set, flags, ranks, config, times, totals);
  if (wrong != 0 && rank == 0) {
    std::fprintf(stderr, "dense_bench: %lld wrong sums (expected %g everywhere)\n",
                 static_cast<long long>(wrong), expected);
  }
  arcreduce::shutdown();
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
