// Completion callbacks that call the API while another thread shuts the runtime down and
// initialises a new one, under mpirun; and, with MPI_THREAD_SERIALIZED, no MPI call of init()
// beside a running coordinator.
//
//   runtime_callback_lifecycle_test [--rounds=N] [--serialized] [--watchdog-seconds=S]
//
// Each round: init(), then ops whose callbacks call rank(), size(), initialized(), stats(),
// poll(), process_set_ids(), chain a new allreduce_async(), and (one op per round) call init()
// (an Error, or nothing while the runtime runs) and shutdown() (a request) themselves; the main
// thread calls shutdown() while those callbacks are still to run. Before the API held its state
// lock only briefly, shutdown() held it while joining the coordinator and the first callback that
// called rank() waited for it forever (the watchdog then fails the job).
//
// First, callbacks that run on the submitting thread (rejected submissions) call the API too.
//
// The MPI_Comm_dup and MPI_Comm_free calls below wrap Open MPI's (PMPI interposition): every
// init() after the first must free the previous runtime's communicators before it duplicates
// the new ones, so that its coordinator never runs while the user's thread is in MPI (with
// MPI_THREAD_SERIALIZED two threads in MPI at once are not allowed).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "arcreduce/arcreduce.h"
#include "tests/mpi/runtime_process.h"

namespace {

std::atomic<bool> g_recording{false};
std::mutex g_events_mu;
std::vector<char> g_events;  // 'd' dup, 'f' free, while recording (init() on the main thread)

void record(char what) {
  if (!g_recording.load()) return;
  std::lock_guard<std::mutex> lock(g_events_mu);
  g_events.push_back(what);
}

std::atomic<int> g_callbacks{0};
std::atomic<int> g_api_errors{0};  // unexpected exceptions inside callbacks
std::atomic<int> g_init_refused{0};
std::atomic<bool> g_failed{false};

void fail(int rank, const std::string& what) {
  std::fprintf(stderr, "[rank %d] TEST-ERROR %s\n", rank, what.c_str());
  std::fflush(stderr);
  g_failed = true;
}

struct Op {
  std::vector<float> data = std::vector<float>(16, 1.0f);
  std::vector<float> chained = std::vector<float>(16, 1.0f);
};

// What a callback does: every kind of API call, none of which may hang or crash.
void use_the_api(int rank, bool lifecycle, Op* op, int round, int index) {
  try {
    (void)arcreduce::initialized();
    if (arcreduce::initialized()) {
      (void)arcreduce::rank();
      (void)arcreduce::size();
    }
    (void)arcreduce::stats();
    (void)arcreduce::process_set_ids();
    // Chained: fails with kShutdown when the runtime is shutting down, never hangs.
    arcreduce::AllreduceOptions chained;
    chained.callback = [](const arcreduce::Status&) { g_callbacks++; };
    const arcreduce::Handle h = arcreduce::allreduce_async(
        "chained." + std::to_string(round) + "." + std::to_string(index),
        arcreduce::Tensor{op->chained.data(), arcreduce::DType::kFloat32, {16}}, chained);
    (void)arcreduce::poll(h);
    if (lifecycle) {
      try {
        arcreduce::init();  // from a callback: nothing while running, else an Error
      } catch (const arcreduce::Error&) {
        g_init_refused++;
      }
      arcreduce::shutdown();  // from a callback: only the request
    }
  } catch (const arcreduce::Error& e) {
    // Not initialised (between shutdown and init) is an answer, not a failure.
    if (e.code() != arcreduce::StatusCode::kShutdown) {
      g_api_errors++;
      fail(rank, std::string("callback: ") + e.what());
    }
  }
}

// Callbacks of rejected submissions run at once on the submitting thread, inside
// allreduce_async(). Before any init(), such a callback ran while the API held its state lock,
// and its first API call waited for that lock forever. After shutdown(), a callback that called
// init() there was not treated as a callback: it replaced the runtime under the submission that
// ran it (retiring that runtime waited 10 s for the submission to return), and the handle the
// submission then returned was unknown to the new runtime.
void check_inline_callbacks(int rank) {
  std::vector<float> data(16, 1.0f);
  const arcreduce::Tensor tensor{data.data(), arcreduce::DType::kFloat32, {16}};
  bool ran = false;
  arcreduce::AllreduceOptions before;
  before.callback = [&](const arcreduce::Status&) {
    ran = true;
    if (arcreduce::initialized()) fail(rank, "inline callback: initialized() before init()");
    (void)arcreduce::stats();
    (void)arcreduce::process_set_ids();
  };
  const arcreduce::Status not_initialised =
      arcreduce::synchronize(arcreduce::allreduce_async("inline.before_init", tensor, before));
  if (!ran || not_initialised.code() != arcreduce::StatusCode::kShutdown) {
    fail(rank, "a submission before init(): callback ran " + std::to_string(ran) + ", status " +
                   not_initialised.message());
  }

  arcreduce::init();
  arcreduce::shutdown();
  int refused = 0;
  arcreduce::AllreduceOptions after;
  after.callback = [&](const arcreduce::Status&) {
    try {
      arcreduce::init();
    } catch (const arcreduce::Error&) {
      ++refused;
    }
    arcreduce::shutdown();  // only the request: nothing is running
  };
  const auto start = std::chrono::steady_clock::now();
  const arcreduce::Handle h = arcreduce::allreduce_async("inline.after_shutdown", tensor, after);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const arcreduce::Status late = arcreduce::synchronize(h);
  if (refused != 1 || arcreduce::initialized() || late.code() != arcreduce::StatusCode::kShutdown) {
    fail(rank, "a submission after shutdown(): init() in its callback refused " +
                   std::to_string(refused) + " times (want 1), initialized() " +
                   std::to_string(arcreduce::initialized()) + ", status '" + late.message() +
                   "', the submission took " + std::to_string(seconds) + " s");
  }
}

}  // namespace

extern "C" int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  record('d');
  return PMPI_Comm_dup(comm, newcomm);
}

extern "C" int MPI_Comm_free(MPI_Comm* comm) {
  record('f');
  return PMPI_Comm_free(comm);
}

int main(int argc, char** argv) {
  int rounds = 20;
  bool serialized = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) rounds = std::atoi(argv[i] + 9);
    if (std::strcmp(argv[i], "--serialized") == 0) serialized = true;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE,
                  &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  arcreduce_test::Watchdog watchdog(
      rank, std::chrono::seconds(arcreduce_test::watchdog_seconds(argc, argv, 60)),
      [] { return std::string("TEST-ERROR hung (deadlock?)"); });
  check_inline_callbacks(rank);
  for (int round = 0; round < rounds; ++round) {
    {
      std::lock_guard<std::mutex> lock(g_events_mu);
      g_events.clear();
    }
    g_recording = true;
    arcreduce::init();
    g_recording = false;
    if (round > 0) {
      std::lock_guard<std::mutex> lock(g_events_mu);
      const std::string seq(g_events.begin(), g_events.end());
      const size_t first_dup = seq.find('d');
      const size_t last_free = seq.rfind('f');
      if (first_dup == std::string::npos || last_free == std::string::npos ||
          last_free > first_dup) {
        fail(rank, "init() round " + std::to_string(round) + " made its MPI calls in the order '" +
                       seq + "' (d: dup, f: free): the old communicators must be freed first");
      }
    }
    constexpr int kOps = 8;
    std::vector<Op> ops(kOps);
    std::vector<arcreduce::Handle> handles;
    for (int i = 0; i < kOps; ++i) {
      arcreduce::AllreduceOptions options;
      const bool lifecycle = i == kOps - 1 && round % 2 == 1;
      Op* op = &ops[i];
      options.callback = [rank, lifecycle, op, round, i](const arcreduce::Status&) {
        g_callbacks++;
        // Long enough that the main thread's shutdown() is under way when the API is called.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        use_the_api(rank, lifecycle, op, round, i);
      };
      handles.push_back(arcreduce::allreduce_async(
          "op." + std::to_string(i),
          arcreduce::Tensor{ops[i].data.data(), arcreduce::DType::kFloat32, {16}}, options));
    }
    const size_t waited = round % 3 == 0 ? 1 : 0;  // some rounds see one op through first
    if (waited) (void)arcreduce::synchronize(handles[0]);
    arcreduce::shutdown();  // with callbacks still to run
    for (size_t i = waited; i < handles.size(); ++i) {
      const arcreduce::Status s = arcreduce::synchronize(handles[i]);
      if (!s.ok() && s.code() != arcreduce::StatusCode::kShutdown) {
        fail(rank, "op: " + s.message());
      }
    }
  }
  watchdog.disarm();
  std::fprintf(stderr, "[rank %d] %d rounds, %d callbacks, init() refused in a callback %d times\n",
               rank, rounds, g_callbacks.load(), g_init_refused.load());
  std::fprintf(stderr, "[rank %d] %s\n", rank, g_failed ? "FAIL" : "PASS");
  std::fflush(stderr);
  MPI_Finalize();
  return g_failed ? 1 : 0;
}
