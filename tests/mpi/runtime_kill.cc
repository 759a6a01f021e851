// A rank that dies ends the job, driven by tests/mpi/expect_job.sh.
//
//   runtime_kill_test [--victim=R]
//
// All ranks complete one reduction; then rank R (default 2) SIGKILLs itself while the others
// keep reducing for up to 30 s. The job must end with a non-zero exit in bounded time (the
// driver checks both). Ranks that outlive the 30 s exit 0, which the driver reports as a failure.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "tests/mpi/runtime_test_util.h"

int main(int argc, char** argv) {
  int victim = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--victim=", 9) == 0) victim = std::atoi(argv[i] + 9);
  }
  arcreduce::init();
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();

  arcreduce_test::TestTensor t(arcreduce::DType::kFloat32, {1000});
  arcreduce_test::fill_inputs(t, rank, 0);
  arcreduce::Status s = arcreduce::allreduce("before_kill", t.view(), arcreduce_test::dense());
  if (!s.ok() ||
      !arcreduce_test::check_reduced(t, arcreduce::ReduceOp::kAverage, size, 0).empty()) {
    std::fprintf(stderr, "[rank %d] TEST-ERROR first op failed: %s\n", rank,
                 arcreduce_test::describe(s).c_str());
  }
  std::fprintf(stderr, "[rank %d] first op done\n", rank);
  std::fflush(stderr);

  if (rank == victim) {
    std::fprintf(stderr, "[rank %d] killing myself with SIGKILL\n", rank);
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
    arcreduce_test::fill_inputs(t, rank, i);
    s = arcreduce::allreduce("after_kill", t.view(), arcreduce_test::dense());
    if (!s.ok()) {
      std::fprintf(stderr, "[rank %d] op %d after the kill: %s\n", rank, i,
                   arcreduce_test::describe(s).c_str());
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::fprintf(stderr, "[rank %d] TEST-ERROR still running 30 s after rank %d died\n", rank,
               victim);
  return 0;
}
