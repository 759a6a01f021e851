// algorithm_bench: the runtime's All-Reduce algorithms against each other and against the link
// model's predictions (ops/link_model.h), reduce-only, on the ranks' real links (the simulated
// cluster: scripts/bench-algorithms.sh).
//
// One communicator per algorithm (ring, rabenseifner, doubling, mpi) and one with "auto", whose
// construction measures the link. For each message size the algorithms run interleaved (ring,
// rabenseifner, doubling, mpi, auto, ring, ...) after warm-up rounds, each from a barrier; a
// sample is the slowest rank's time. Prints, per size, each algorithm's median, the one auto
// chose, auto's median against the best fixed one, and the model's prediction for each. The sums
// are checked after every sample (small integers, exact in float32 in any order); a wrong one
// exits 1.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/report.h"
#include "ops/link_model.h"
#include "ops/mpi_communicator.h"
#include "runtime/mpi_environment.h"

namespace ab = arcreduce::bench;

namespace {

using arcreduce::AllreduceAlgorithm;

struct Flags {
  std::vector<double> kilobytes = {4, 64, 256, 1024, 8192};
  int repetitions = 7;
  int warmup = 2;
  bool json = false;
};

// The harness waits and reduces through `harness` (MPI's own algorithm under the runtime's
// sleeping waits): Open MPI's blocking calls would poll, and on a host with a CPU budget that
// polling would spend the budget the timed call needs.
double timed_allreduce(arcreduce::MpiCommunicator& comm, arcreduce::MpiCommunicator& harness,
                       std::vector<float>* buf, int rank, int ranks) {
  std::fill(buf->begin(), buf->end(), static_cast<float>(rank + 1));
  harness.barrier();
  const double start = MPI_Wtime();
  comm.allreduce(buf->data(), buf->size(), arcreduce::ScalarType::kFloat32,
                 arcreduce::CollectiveOp::kSum);
  double elapsed = MPI_Wtime() - start;
  harness.allreduce(&elapsed, 1, arcreduce::ScalarType::kFloat64, arcreduce::CollectiveOp::kMax);
  const float expected = static_cast<float>(ranks) * (ranks + 1) / 2;
  int wrong = 0;
  for (float v : *buf) wrong |= v != expected;
  harness.allreduce(&wrong, 1, arcreduce::ScalarType::kInt32, arcreduce::CollectiveOp::kMax);
  if (wrong) {
    if (rank == 0) std::fprintf(stderr, "algorithm_bench: wrong sum\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  arcreduce::apply_mpi_environment_defaults();  // the eager limit the runtime's init() sets
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Flags flags;
  CLI::App app("The runtime's All-Reduce algorithms against each other and the link model.");
  app.add_option("--kilobytes", flags.kilobytes, "message sizes (KB of float32)")
      ->capture_default_str();
  app.add_option("--repetitions", flags.repetitions, "timed rounds per size and algorithm")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", flags.warmup, "untimed rounds first")->capture_default_str();
  app.add_flag("--json", flags.json, "one JSON line per size");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = rank == 0 ? app.exit(e) : e.get_exit_code();
    MPI_Finalize();
    return code;
  }
  const std::vector<AllreduceAlgorithm> algorithms = {
      AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRabenseifner, AllreduceAlgorithm::kDoubling,
      AllreduceAlgorithm::kMpi, AllreduceAlgorithm::kAuto};
  // comms[3] (MPI's) also serves the harness.
  std::vector<std::unique_ptr<arcreduce::MpiCommunicator>> comms;
  for (AllreduceAlgorithm a : algorithms) {
    comms.push_back(std::make_unique<arcreduce::MpiCommunicator>(MPI_COMM_WORLD, a));
  }
  arcreduce::MpiCommunicator& automatic = *comms.back();
  const arcreduce::LinkModel link = automatic.options().link;
  if (rank == 0 && !flags.json) {
    std::printf("algorithm_bench  %s, %d ranks (%d on rank 0's host)\n", ab::utc_now().c_str(),
                ranks, automatic.local_size());
    std::printf("machine          %s\n", ab::machine_description().c_str());
    std::printf("link (auto)      %s\n", arcreduce::describe_link(link).c_str());
    std::printf(
        "samples          %d (+%d warm-up) per size and algorithm, interleaved, the slowest "
        "rank from a barrier\n\n",
        flags.repetitions, flags.warmup);
    for (const auto& [name, cost] :
         {std::pair{"ring", link.ring}, std::pair{"rabenseifner", link.rabenseifner},
          std::pair{"doubling", link.doubling}}) {
      std::printf("fitted %-12s %.2f ms + %.3f ms/MB\n", name, cost.fixed_seconds * 1e3,
                  cost.seconds_per_byte * 1e9);
    }
    std::printf("\n");
    std::printf("%10s | %9s %9s %9s %9s %9s | %-12s %8s | %9s %9s %9s\n", "KB", "ring ms",
                "raben ms", "doubl ms", "mpi ms", "auto ms", "auto took", "/ best", "model ring",
                "raben", "doubl");
  }
  for (double kb : flags.kilobytes) {
    const size_t count = std::max<size_t>(1, static_cast<size_t>(kb * 1000 / sizeof(float)));
    const size_t bytes = count * sizeof(float);
    std::vector<float> buf(count);
    std::vector<std::vector<double>> samples(algorithms.size());
    for (int round = 0; round < flags.warmup + flags.repetitions; ++round) {
      for (size_t a = 0; a < algorithms.size(); ++a) {
        const double t = timed_allreduce(*comms[a], *comms[3], &buf, rank, ranks);
        if (round >= flags.warmup) samples[a].push_back(t);
      }
    }
    std::vector<double> median;
    for (const auto& s : samples) median.push_back(ab::summarize(s).median);
    const double best = *std::min_element(median.begin(), median.end() - 1);
    const char* took = arcreduce::allreduce_algorithm_name(automatic.algorithm_for(bytes));
    double model[3];
    for (int a = 0; a < 3; ++a) {
      model[a] = arcreduce::predicted_allreduce_seconds(algorithms[a], bytes, ranks, link);
    }
    if (rank != 0) continue;
    if (flags.json) {
      std::printf(
          "{\"bench\": \"algorithms\", \"ranks\": %d, \"bytes\": %zu, \"auto\": \"%s\", "
          "\"link_latency_us\": %.2f, \"link_mbit_per_s\": %.2f, \"median_s\": {\"ring\": "
          "%.6f, \"rabenseifner\": %.6f, \"doubling\": %.6f, \"mpi\": %.6f, \"auto\": "
          "%.6f}, \"model_s\": {\"ring\": %.6f, \"rabenseifner\": %.6f, \"doubling\": "
          "%.6f}}\n",
          ranks, bytes, took, link.latency_seconds * 1e6,
          link.seconds_per_byte > 0 ? 8e-6 / link.seconds_per_byte : 0, median[0], median[1],
          median[2], median[3], median[4], model[0], model[1], model[2]);
    } else {
      std::printf("%10.0f | %9.2f %9.2f %9.2f %9.2f %9.2f | %-12s %8.3f | %9.2f %9.2f %9.2f\n", kb,
                  median[0] * 1e3, median[1] * 1e3, median[2] * 1e3, median[3] * 1e3,
                  median[4] * 1e3, took, median[4] / best, model[0] * 1e3, model[1] * 1e3,
                  model[2] * 1e3);
    }
    std::fflush(stdout);
  }
  comms.clear();
  MPI_Finalize();
  return 0;
}
