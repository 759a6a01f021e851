// shutdown(); init(); on the main thread while other threads use the API, under mpirun.
//
//   runtime_reinit_test [--rounds=N] [--watchdog-seconds=S]
//
// The public API may be called from any thread after init(), and init() replaces a runtime that
// was shut down. Three worker threads submit ops, synchronize them and synchronize stale
// handles in a loop while the main thread shuts the runtime down and initialises a new one N
// times (default 150). A runtime that init() replaces must stay alive until the last call still
// using it returns: before that was so, synchronize() used a runtime that the main thread had
// already deleted (AddressSanitizer: heap-use-after-free). Every op must end with its values
// averaged across the ranks (kOk), with kShutdown (shut down before it ran, or submitted between
// shutdown() and init()) or, when synchronize() reached the next runtime, with kInvalidArgument
// for a handle that runtime does not know; never anything else, and the values of an op that
// failed must be untouched. Every rank prints PASS or FAIL lines and exits non-zero on failure;
// a watchdog aborts the job if anything hangs.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "arcreduce/arcreduce.h"
#include "tests/mpi/runtime_process.h"
#include "tests/mpi/runtime_test_util.h"

namespace {

using arcreduce::Status;
using arcreduce::StatusCode;

constexpr int kWorkers = 3;
constexpr int kElements = 4;

arcreduce_test::Progress g_progress;
std::mutex g_fail_mu;  // Progress::fail is called from several threads here

void fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_fail_mu);
  g_progress.fail(what);
}

struct WorkerCounts {
  int ok = 0;
  int shutdown = 0;
  int unknown_handle = 0;
};

// Submits "w<worker>/<i>" (rank r contributes r + 1 + i, so the average is (size + 1) / 2 + i),
// synchronizes it and, in between, the handle of the op before, which is already released (the
// stale call's status is not checked). Handles are unique in the process: before they were, a
// new runtime gave an op the number of one that completed in the runtime before it, and the
// earlier op's synchronize() returned the later op's kShutdown over values already averaged.
void work(int worker, int rank, int size, const std::atomic<bool>& stop, WorkerCounts* counts) {
  arcreduce::Handle previous = 0;
  for (int i = 0; !stop.load(); ++i) {
    std::vector<float> values(kElements, static_cast<float>(rank + 1 + i));
    const std::string name = "w" + std::to_string(worker) + "/" + std::to_string(i);
    const arcreduce::Handle handle = arcreduce::allreduce_async(
        name, arcreduce::Tensor{values.data(), arcreduce::DType::kFloat32, {kElements}},
        arcreduce_test::dense());
    if (previous != 0) arcreduce::synchronize(previous);
    previous = handle;
    const Status status = arcreduce::synchronize(handle);
    const float mean = static_cast<float>(size + 1) / 2.0f + static_cast<float>(i);
    const float mine = static_cast<float>(rank + 1 + i);
    switch (status.code()) {
      case StatusCode::kOk:
        ++counts->ok;
        break;
      case StatusCode::kShutdown:
        ++counts->shutdown;
        break;
      case StatusCode::kInvalidArgument:
        ++counts->unknown_handle;
        break;
      default:
        fail(name + ": unexpected status " + status.message());
    }
    // An op whose handle the next runtime did not know may have completed in its own.
    for (float v : values) {
      const bool right = status.ok()                                     ? v == mean
                         : status.code() == StatusCode::kInvalidArgument ? v == mean || v == mine
                                                                         : v == mine;
      if (!right) {
        fail(name + ": value " + std::to_string(v) + " after status '" + status.message() +
             "' (own value " + std::to_string(mine) + ", mean " + std::to_string(mean) + ")");
        break;
      }
    }
  }
}

int rounds_arg(int argc, char** argv) {
  const std::string prefix = "--rounds=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoi(argv[i] + prefix.size());
    }
  }
  return 150;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const int rank = arcreduce_test::world_rank();
  const int size = arcreduce_test::world_size();
  g_progress.set_rank(rank);
  const int rounds = rounds_arg(argc, argv);
  const int timeout = arcreduce_test::watchdog_seconds(argc, argv, 100);
  arcreduce_test::Watchdog watchdog(rank, std::chrono::seconds(timeout), [] {
    return "FAIL: watchdog: " + g_progress.hung_in() + "; aborting";
  });

  g_progress.set_stage("first init");
  arcreduce::init();
  std::atomic<bool> stop{false};
  std::vector<WorkerCounts> counts(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back(work, w, rank, size, std::cref(stop), &counts[w]);
  }
  for (int round = 0; round < rounds; ++round) {
    g_progress.set_stage("round " + std::to_string(round));
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
    arcreduce::shutdown();
    arcreduce::init();
    // With more ranks, another rank's next shutdown() may already have stopped this runtime.
    if (size == 1 && !arcreduce::initialized()) fail("initialized() is false after init()");
  }
  g_progress.set_stage("joining the workers");
  stop = true;
  // A worker may wait for an op that another rank submitted to an earlier runtime: shutdown()
  // completes it.
  arcreduce::shutdown();
  for (auto& t : workers) t.join();

  WorkerCounts total;
  for (const WorkerCounts& c : counts) {
    total.ok += c.ok;
    total.shutdown += c.shutdown;
    total.unknown_handle += c.unknown_handle;
  }
  std::fprintf(stderr, "[rank %d] %d rounds; ops: %d ok, %d shut down, %d handle unknown\n", rank,
               rounds, total.ok, total.shutdown, total.unknown_handle);
  if (total.ok + total.shutdown + total.unknown_handle == 0) fail("no op was submitted");
  return arcreduce_test::finish(watchdog, rank, g_progress.failures());
}
