// The rank program of the simulated-cluster test (run_cluster_test.sh): every rank reduces known
// values through the arcreduce runtime (the dense path, whose chunks are large enough to take
// MPI's rendezvous path over TCP, and ARC-Top-K at ratio 1, which must equal it), checks every
// element and the runtime's view of the hosts (one rank per host; with --ranks-per-host=S, S
// ranks on each host but the last, which takes the rest, and the hierarchical All-Reduce on
// unless ARCREDUCE_HIERARCHICAL=0), and rank 0 prints one line per rank with the host the rank
// ran on and whether its results were right:
//
//   rank R of P host NAME result ok
//   rank R of P host NAME result wrong: element I is X, expected Y
//
// Rank 0 prints all lines (gathered), so that output of different ranks cannot interleave.
// Exit code 0 when every rank's result is right, 1 otherwise.
#include <arcreduce/arcreduce.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kElements = 1 << 20;  // 4 MiB of float32, well past the TCP eager limit
constexpr int kLineBytes = 256;

// Small integers, so that the float sum is exact in any order of reduction.
float contribution(int rank, int i) {
  return static_cast<float>((rank + 1) * (i % 97 + 1));
}

// "ok", or what is wrong with `values` (sum of every rank's contribution expected).
std::string check_sum(const std::vector<float>& values, int size, const char* what) {
  const float rank_sum = static_cast<float>(size * (size + 1) / 2);
  for (int i = 0; i < kElements; ++i) {
    const float expected = rank_sum * static_cast<float>(i % 97 + 1);
    if (values[i] != expected) {
      return std::string("wrong: ") + what + " element " + std::to_string(i) + " is " +
             std::to_string(values[i]) + ", expected " + std::to_string(expected);
    }
  }
  return "ok";
}

}  // namespace

int main(int argc, char** argv) {
  int per_host = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--ranks-per-host=", 17) == 0) per_host = std::atoi(argv[i] + 17);
  }
  arcreduce::Config config = arcreduce::Config::from_env();
  arcreduce::init(config);  // initialises MPI
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();

  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int host_length = 0;
  MPI_Get_processor_name(host, &host_length);

  std::string verdict = "ok";
  const int first = rank / per_host * per_host;
  const int local_size = std::min(per_host, size - first);
  if (arcreduce::local_size() != local_size || arcreduce::local_rank() != rank - first) {
    verdict = "wrong: the runtime sees rank " + std::to_string(arcreduce::local_rank()) + " of " +
              std::to_string(arcreduce::local_size()) + " on this host";
  }
  const int hosts = (size + per_host - 1) / per_host;
  const bool hierarchical = per_host > 1 && hosts > 1 && config.hierarchical != "0";
  const arcreduce::Stats stats = arcreduce::stats();
  if (verdict == "ok" && (stats.hosts != hosts || stats.hierarchical != hierarchical)) {
    verdict = "wrong: stats say " + std::to_string(stats.hosts) + " hosts, hierarchical " +
              std::to_string(stats.hierarchical);
  }
  const std::vector<int64_t> shape = {kElements / 1024, 1024};
  for (const char* compressor : {"none", "arctopk"}) {
    std::vector<float> values(kElements);
    for (int i = 0; i < kElements; ++i) values[i] = contribution(rank, i);
    arcreduce::AllreduceOptions options;
    options.op = arcreduce::ReduceOp::kSum;
    options.compression.compressor = compressor;
    options.compression.ratio = 1.0;              // every row: ARC-Top-K must give the exact sum
    options.compression.error_feedback = "none";  // no dense warm start to hide behind
    const arcreduce::Status status = arcreduce::allreduce(
        std::string("cluster/") + compressor,
        arcreduce::Tensor{values.data(), arcreduce::DType::kFloat32, shape}, options);
    if (verdict != "ok") continue;
    verdict = status.ok() ? check_sum(values, size, compressor)
                          : std::string("wrong: ") + compressor + ": " + status.message();
  }

  char line[kLineBytes] = {};
  std::snprintf(line, sizeof line, "rank %d of %d host %s result %s", rank, size, host,
                verdict.c_str());
  std::vector<char> lines(rank == 0 ? static_cast<size_t>(size) * kLineBytes : 0);
  MPI_Gather(line, kLineBytes, MPI_CHAR, lines.data(), kLineBytes, MPI_CHAR, 0, MPI_COMM_WORLD);
  int failed = verdict == "ok" ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r) std::printf("%s\n", &lines[static_cast<size_t>(r) * kLineBytes]);
    std::fflush(stdout);
  }
  arcreduce::shutdown();
  // No MPI_Finalize() here: init() initialised MPI, so arcreduce finalises it at exit, after
  // tearing down its runtime (whose communicators must be freed before MPI is finalised).
  return failed;
}
