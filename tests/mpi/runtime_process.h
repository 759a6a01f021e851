// Process scaffolding shared by the main() of the runtime's multi-process tests
// (runtime_main.cc, runtime_config.cc, runtime_shutdown.cc): a watchdog that turns a hang into
// a job abort with a message, and the common end of main(). MPI must be initialised first.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace arcreduce_test {

// Aborts the whole job (MPI_Abort, exit code 3) unless disarmed within `timeout`, after
// printing "[rank R] <describe()>" on stderr, so a hang is a failure that says where it hung.
// `describe` runs on the watchdog's own thread when the time is up; it must be thread-safe.
class Watchdog {
 public:
  Watchdog(int rank, std::chrono::seconds timeout, std::function<std::string()> describe)
      : thread_([this, rank, timeout, describe = std::move(describe)] {
          std::unique_lock<std::mutex> lock(mu_);
          if (cv_.wait_for(lock, timeout, [this] { return disarmed_; })) return;
          std::fprintf(stderr, "[rank %d] %s\n", rank, describe().c_str());
          std::fflush(stderr);
          MPI_Abort(MPI_COMM_WORLD, 3);
        }) {}
  ~Watchdog() { disarm(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Stops the countdown and joins the thread. Idempotent.
  void disarm() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      disarmed_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;  // declared before thread_: the thread uses them as soon as it starts
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

// The value of a "--watchdog-seconds=N" argument, or `fallback`.
inline int watchdog_seconds(int argc, char** argv, int fallback) {
  const std::string prefix = "--watchdog-seconds=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.compare(0, prefix.size(), prefix) == 0) return std::atoi(arg.c_str() + prefix.size());
  }
  return fallback;
}

// Where a test program is (for the watchdog's message) and how many checks failed on this rank.
// Thread-safe: the watchdog reads the stage from its own thread.
class Progress {
 public:
  void set_rank(int rank) { rank_ = rank; }
  void set_stage(const std::string& stage) {
    std::lock_guard<std::mutex> lock(mu_);
    stage_ = stage;
  }
  std::string hung_in() const {
    std::lock_guard<std::mutex> lock(mu_);
    return "hung in " + stage_;
  }
  // Records a failed check and prints "[rank R] FAIL: <what>".
  void fail(const std::string& what) {
    ++failures_;
    std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank_, what.c_str());
    std::fflush(stderr);
  }
  int failures() const { return failures_; }

 private:
  int rank_ = 0;
  int failures_ = 0;
  mutable std::mutex mu_;
  std::string stage_ = "start";
};

// The end of every test's main(), collective over MPI_COMM_WORLD: disarms `watchdog`, waits for
// every rank, prints this rank's verdict "[rank R] PASS (0 failures)" or "[rank R] FAIL (<n>
// failures)<detail>" and, on rank 0, "PASSED|FAILED: <k> of the job's ranks reported
// failures", finalises MPI and returns the process's exit status (1 on this rank's failure).
inline int finish(Watchdog& watchdog, int rank, int failures, const std::string& detail = "") {
  watchdog.disarm();
  const int mine = failures != 0;
  int failed_ranks = 0;
  MPI_Allreduce(&mine, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::fprintf(stderr, "[rank %d] %s (%d failures)%s\n", rank, failures ? "FAIL" : "PASS", failures,
               failures ? detail.c_str() : "");
  if (rank == 0) {
    std::fprintf(stderr, "%s: %d of the job's ranks reported failures\n",
                 failed_ranks ? "FAILED" : "PASSED", failed_ranks);
  }
  std::fflush(stderr);
  MPI_Finalize();
  return failures ? 1 : 0;
}

}  // namespace arcreduce_test
