// main() of runtime_mpi_tests: a gtest binary that every rank of an mpirun job runs.
//
// - MPI is initialised here (MPI_THREAD_MULTIPLE) before arcreduce::init(), which reads the
//   ARCREDUCE_* variables the CTest entry sets (fusion on/off, cache on/off, ...).
// - Every test runs on every rank in the same order; tests submit the same tensors on all ranks
//   and use EXPECT (not ASSERT) around submissions, so a failure on one rank does not leave the
//   others waiting for a tensor.
// - Failures are printed with a "[rank r]" prefix; only rank 0 prints gtest's normal report.
// - The process exits non-zero on the ranks that failed, so mpirun exits non-zero.
// - A watchdog aborts the job (MPI_Abort) naming the rank and the running test if the run
//   takes longer than --watchdog_seconds (default 100): a hang is a failure with a message.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "arcreduce/arcreduce.h"
#include "tests/mpi/runtime_process.h"

namespace {

std::mutex g_mu;
std::string g_current_test = "(none)";
std::vector<std::string> g_failed_tests;

class RankReporter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankReporter(int rank) : rank_(rank) {}

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(g_mu);
    g_current_test = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] FAILURE in %s at %s:%d:\n%s\n", rank_, current().c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
    std::fflush(stderr);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::lock_guard<std::mutex> lock(g_mu);
      g_failed_tests.push_back(std::string(info.test_suite_name()) + "." + info.name());
    }
  }

 private:
  static std::string current() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_current_test;
  }
  int rank_;
};

int parse_watchdog(int* argc, char** argv) {
  int seconds = 100;
  const char* prefix = "--watchdog_seconds=";
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) {
      seconds = std::atoi(argv[i] + std::strlen(prefix));
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "[rank %d] FAILURE: MPI provides thread level %d, need MULTIPLE\n", rank,
                 provided);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int watchdog_seconds = parse_watchdog(&argc, argv);
  ::testing::InitGoogleTest(&argc, argv);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankReporter(rank));

  arcreduce_test::Watchdog watchdog(rank, std::chrono::seconds(watchdog_seconds), [=] {
    std::lock_guard<std::mutex> lock(g_mu);
    return "FAILURE: watchdog: still running " + g_current_test + " after " +
           std::to_string(watchdog_seconds) + " s; aborting";
  });

  try {
    arcreduce::init();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] FAILURE: arcreduce::init() threw: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int rc = RUN_ALL_TESTS();
  arcreduce::shutdown();

  // Failures are counted in failed tests; RUN_ALL_TESTS() may fail with none (a global failure).
  std::string failed = ":";
  for (const auto& t : g_failed_tests) failed += " " + t;
  const int failures = rc == 0 ? 0 : std::max<int>(1, static_cast<int>(g_failed_tests.size()));
  return arcreduce_test::finish(watchdog, rank, failures, failed);
}
