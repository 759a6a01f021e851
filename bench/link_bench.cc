// link_bench: how fast one large MPI_Allreduce runs over the ranks' links, next to the time the
// link rate predicts. Meant for the simulated cluster (scripts/bench-link.sh,
// docs/design/simulated-cluster.md), where every host's link is shaped to a known rate.
//
// A sample is the slowest rank's time of one MPI_Allreduce(MPI_SUM) of --megabytes of float32
// (separate send and receive buffers), from a barrier. The prediction is the ring bound: each
// rank sends and receives 2(P-1)/P of the buffer, so at R bit/s per host and direction
//   T = 2(P-1)/P * bytes * 8 / R.
// "bus Gbit/s" is the same traffic over the measured time (NCCL's bus bandwidth), comparable with
// R directly. The result is checked after every sample; a wrong sum makes the program exit 1.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/report.h"

namespace ab = arcreduce::bench;

namespace {

struct Flags {
  double megabytes = 100;  // decimal MB
  int repetitions = 10;
  int warmup = 2;
  double rate_bps = 0;  // bit/s per host and direction; 0: no prediction
  std::string commit = "unknown";
};

// Small integers, exact in float whatever order MPI sums them in.
float contribution(int rank, size_t i) {
  return static_cast<float>(rank + 1 + i % 16);
}

// The ranks' host names in rank order, as "h1, h2, ..." with repeats counted ("h1 x2").
std::string host_list(int rank, int ranks) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::vector<char> all(rank == 0 ? static_cast<size_t>(ranks) * MPI_MAX_PROCESSOR_NAME : 0);
  MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
             0, MPI_COMM_WORLD);
  std::vector<std::pair<std::string, int>> hosts;
  for (int r = 0; rank == 0 && r < ranks; ++r) {
    const std::string host(&all[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    if (!hosts.empty() && hosts.back().first == host) {
      ++hosts.back().second;
    } else {
      hosts.emplace_back(host, 1);
    }
  }
  std::string list;
  for (const auto& [host, count] : hosts) {
    list += (list.empty() ? "" : ", ") + host + (count > 1 ? " x" + std::to_string(count) : "");
  }
  return list;
}

void print_table(const Flags& flags, int ranks, const std::string& hosts, size_t elements,
                 const ab::Summary& s) {
  const double bytes = static_cast<double>(elements) * sizeof(float);
  const double ring_bytes = 2.0 * (ranks - 1) / ranks * bytes;
  std::printf("link_bench  %s\n", ab::utc_now().c_str());
  std::printf("commit       %s\n", flags.commit.c_str());
  std::printf("machine      %s\n", ab::machine_description().c_str());
  std::printf("mpi          %s\n", ab::mpi_library().c_str());
  std::printf("ranks        %d on %s\n", ranks, hosts.c_str());
  std::printf("buffer       %.2f MB float32 (%zu elements), MPI_SUM, send != receive buffer\n",
              bytes / 1e6, elements);
  if (flags.rate_bps > 0) {
    std::printf(
        "link         %.3f Gbit/s per host and direction; ring bound 2(P-1)/P * %.2f MB"
        " = %.2f MB per rank each way\n",
        flags.rate_bps / 1e9, bytes / 1e6, ring_bytes / 1e6);
  } else {
    std::printf("link         rate not given (--rate-bps), no prediction\n");
  }
  std::printf("repetitions  %d (+%d warm-up), slowest rank from a barrier\n\n", flags.repetitions,
              flags.warmup);
  std::printf("%10s %10s %10s %12s %10s %12s\n", "median s", "p90 s", "min s", "predicted s",
              "/ predicted", "bus Gbit/s");
  const double bus_gbit = ring_bytes * 8 / s.median / 1e9;
  if (flags.rate_bps > 0) {
    const double predicted = ring_bytes * 8 / flags.rate_bps;
    std::printf("%10.3f %10.3f %10.3f %12.3f %10.3f %12.3f\n", s.median, s.p90, s.min, predicted,
                s.median / predicted, bus_gbit);
  } else {
    std::printf("%10.3f %10.3f %10.3f %12s %10s %12.3f\n", s.median, s.p90, s.min, "-", "-",
                bus_gbit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);

  Flags flags;
  CLI::App app("One large MPI_Allreduce against the time the link rate predicts.");
  app.add_option("--megabytes", flags.megabytes, "buffer size in MB (10^6 bytes)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--repetitions", flags.repetitions, "timed allreduces")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", flags.warmup, "untimed allreduces first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--rate-bps", flags.rate_bps, "link rate in bit/s per host and direction")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--commit", flags.commit, "commit id printed in the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    MPI_Finalize();
    return code;
  }

  const auto elements = static_cast<size_t>(std::llround(flags.megabytes * 1e6 / sizeof(float)));
  if (elements == 0 || elements > static_cast<size_t>(INT32_MAX)) {
    if (rank == 0) std::fprintf(stderr, "link_bench: --megabytes out of range\n");
    MPI_Finalize();
    return 2;
  }
  std::vector<float> send(elements), receive(elements);
  for (size_t i = 0; i < elements; ++i) send[i] = contribution(rank, i);
  const std::string hosts = host_list(rank, ranks);

  std::vector<double> times;
  int64_t wrong = 0;
  for (int round = -flags.warmup; round < flags.repetitions; ++round) {
    std::fill(receive.begin(), receive.end(), 0.0f);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    MPI_Allreduce(send.data(), receive.data(), static_cast<int>(elements), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    double seconds = MPI_Wtime() - start;
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (round >= 0) times.push_back(seconds);
    const float rank_sum = static_cast<float>(ranks * (ranks + 1) / 2);
    for (size_t i = 0; i < elements; ++i) {
      wrong += receive[i] != rank_sum + static_cast<float>(ranks) * static_cast<float>(i % 16);
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);

  if (rank == 0) {
    print_table(flags, ranks, hosts, elements, ab::summarize(times));
    if (wrong > 0)
      std::printf("\nWRONG: %lld elements differ from the expected sum\n",
                  static_cast<long long>(wrong));
  }
  MPI_Finalize();
  return wrong > 0 ? 1 : 0;
}
