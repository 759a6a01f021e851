// One rank's coordinator fails (an Error thrown on that rank only, inside the allreduce the
// others wait in): the job must end on every rank within seconds with that rank's message,
// driven by tests/mpi/expect_job.sh.
//
//   runtime_coordinator_failure_test [--victim=R]
//
// Every rank completes one reduction; then rank R's communicator throws from its next
// allreduce. Ranks still running 30 s later print TEST-ERROR and exit 0, which the driver
// reports as a failure (the stall timeout of the test's environment is 40 s: ending by it is too
// late for --within).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "ops/mpi_communicator.h"
#include "runtime/runtime.h"
#include "tests/runtime/failing_communicator.h"

int main(int argc, char** argv) {
  int victim = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--victim=", 9) == 0) victim = std::atoi(argv[i] + 9);
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto arm = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<arcreduce::Communicator> comm =
      std::make_unique<arcreduce::MpiCommunicator>(MPI_COMM_WORLD);
  if (rank == victim) {
    comm = std::make_unique<arcreduce::testing::FailingCommunicator>(
        std::move(comm), arm, "injected receive-side failure");
  }
  arcreduce::Config config = arcreduce::Config::from_env();
  config.compressor = "none";
  {
    arcreduce::Runtime rt(config, std::move(comm));
    std::vector<float> g(4096, 1.0f);
    arcreduce::Tensor t{g.data(), arcreduce::DType::kFloat32, {4096}};
    arcreduce::Status s = rt.synchronize(rt.allreduce_async("before", t, {}));
    if (!s.ok())
      std::fprintf(stderr, "[rank %d] TEST-ERROR first op: %s\n", rank, s.message().c_str());
    std::fprintf(stderr, "[rank %d] first op done\n", rank);
    std::fflush(stderr);
    MPI_Barrier(MPI_COMM_WORLD);  // every rank is past the first op before the victim arms
    if (rank == victim) arm->store(true);
    s = rt.synchronize(rt.allreduce_async("after", t, {}));
    std::fprintf(stderr, "[rank %d] second op: %s\n", rank, s.ok() ? "ok" : s.message().c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::seconds(30));
    std::fprintf(stderr, "[rank %d] TEST-ERROR still running 30 s after rank %d failed\n", rank,
                 victim);
    std::fflush(stderr);
    std::_Exit(0);
  }
}
