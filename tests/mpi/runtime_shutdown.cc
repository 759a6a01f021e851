// shutdown() with pending ops, under mpirun with 2+ ranks.
//
//   runtime_shutdown_test --shutdown-rank=all|R [--during-traffic]
//
// Before init: initialized() is false, rank()/size() throw Error, stats() is zero and an op
// completes at once with kShutdown. After init and one good op, every rank submits a tensor no
// other rank submits (rank 0 also one more), so they stay pending. Then either every rank calls
// shutdown() (while a helper thread is blocked in synchronize on one of the pending ops) or only
// rank R does, and the other ranks must see their pending ops complete with kShutdown because
// of R. Afterwards ops complete immediately with kShutdown (callback fired), shutdown() is
// idempotent, initialized() is false. Every rank prints PASS or FAIL lines prefixed with its
// rank and exits non-zero on failure; a watchdog aborts the job if anything hangs.
// With --during-traffic, all ranks reduce batches of tensors in a loop and rank R shuts down
// in the middle: every op still completes exactly once, either correctly or with kShutdown,
// and every other rank stops with kShutdown instead of hanging.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/mpi/runtime_process.h"
#include "tests/mpi/runtime_test_util.h"

namespace {

using arcreduce::Handle;
using arcreduce::Status;
using arcreduce::StatusCode;
using arcreduce_test::describe;
using arcreduce_test::TestTensor;

int g_rank = -1;
int g_failures = 0;
std::mutex g_stage_mu;
std::string g_stage = "start";

void set_stage(const char* stage) {
  std::lock_guard<std::mutex> lock(g_stage_mu);
  g_stage = stage;
}

std::string current_stage() {
  std::lock_guard<std::mutex> lock(g_stage_mu);
  return g_stage;
}

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "[rank %d] FAIL: %s\n", g_rank, what.c_str());
    std::fflush(stderr);
  }
}

struct Pending {
  TestTensor tensor{arcreduce::DType::kFloat32, {8}};
  Handle handle = 0;
  std::mutex mu;
  int calls = 0;
  Status status;
  void submit(const std::string& name) {
    arcreduce::AllreduceOptions o = arcreduce_test::dense();
    o.callback = [this](const Status& s) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      status = s;
    };
    handle = arcreduce::allreduce_async(name, tensor.view(), o);
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  Status get() {
    std::lock_guard<std::mutex> lock(mu);
    return status;
  }
};

bool is_shutdown(const Status& s) {
  return s.code() == StatusCode::kShutdown && s.message().find("shut down") != std::string::npos;
}

void check_completed_with_shutdown(Pending& p, const std::string& what) {
  check(p.count() == 1,
        what + ": callback fired " + std::to_string(p.count()) + " times, want exactly once");
  check(is_shutdown(p.get()), what + ": callback status " + describe(p.get()) +
                                  ", want kShutdown mentioning \"shut down\"");
}

// Ops after shutdown (or before init): complete at once with kShutdown, callback fired.
void check_rejected_when_not_running(const std::string& name) {
  Pending p;
  p.submit(name);
  check(arcreduce::poll(p.handle), name + ": poll() must be true at once");
  check(p.count() == 1, name + ": callback must have fired before allreduce_async returned");
  Status s = arcreduce::synchronize(p.handle);
  check(s.code() == StatusCode::kShutdown, name + ": synchronize gave " + describe(s));
  TestTensor t(arcreduce::DType::kFloat32, {3});
  s = arcreduce::allreduce(name + "_sync", t.view(), arcreduce_test::dense());
  check(s.code() == StatusCode::kShutdown, name + ": allreduce gave " + describe(s));
}

template <typename F>
bool throws_error(F f) {
  try {
    f();
  } catch (const arcreduce::Error&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

// Returns after this rank saw kShutdown (or, on the shutting-down rank, after shutdown()).
void run_pending_ops_case(int shutdown_rank);

void traffic_until_shutdown(int shutdown_rank, int size) {
  constexpr int kBatch = 8;
  constexpr int kBatchesBeforeShutdown = 20;
  bool stop = false;
  int batches = 0, ok_ops = 0, shutdown_ops = 0;
  for (int batch = 0; !stop; ++batch) {
    ++batches;
    std::vector<std::unique_ptr<Pending>> ops;
    for (int i = 0; i < kBatch; ++i) {
      ops.push_back(std::make_unique<Pending>());
      arcreduce_test::fill_inputs(ops.back()->tensor, g_rank, batch + i);
      ops.back()->submit("traffic/" + std::to_string(i));
    }
    if (g_rank == shutdown_rank && batch == kBatchesBeforeShutdown - 1) {
      arcreduce::shutdown();  // with this batch in flight
      stop = true;
    }
    for (int i = 0; i < kBatch; ++i) {
      Pending& p = *ops[i];
      Status s = arcreduce::synchronize(p.handle);
      const std::string what = "batch " + std::to_string(batch) + " op " + std::to_string(i);
      check(p.count() == 1, what + ": callback fired " + std::to_string(p.count()) + " times");
      if (s.ok()) {
        ++ok_ops;
        check(
            arcreduce_test::check_reduced(p.tensor, arcreduce::ReduceOp::kAverage, size, batch + i)
                .empty(),
            what + ": wrong result");
      } else {
        check(s.code() == StatusCode::kShutdown, what + ": " + describe(s));
        ++shutdown_ops;
        stop = true;
      }
    }
  }
  std::fprintf(stderr, "[rank %d] traffic stopped after %d batches (%d ok, %d shut down)\n", g_rank,
               batches, ok_ops, shutdown_ops);
  arcreduce::shutdown();
  check(!arcreduce::initialized(), "initialized() must be false after shutdown");
  check_rejected_when_not_running("after_traffic");
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  const int size = arcreduce_test::world_size();
  int shutdown_rank = -1;  // -1: all ranks
  bool during_traffic = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--during-traffic") == 0) during_traffic = true;
    if (std::strncmp(argv[i], "--shutdown-rank=", 16) == 0 && std::strcmp(argv[i] + 16, "all")) {
      shutdown_rank = std::atoi(argv[i] + 16);
    }
  }
  if (size < 2 || shutdown_rank >= size || (during_traffic && shutdown_rank < 0)) {
    std::fprintf(stderr, "[rank %d] FAIL: needs -np >= 2 and a valid --shutdown-rank\n", g_rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  arcreduce_test::Watchdog watchdog(g_rank, std::chrono::seconds(45), [] {
    return "FAIL: watchdog: stuck at stage '" + current_stage() + "' for 45 s; aborting";
  });

  // Before init.
  set_stage("before init");
  check(!arcreduce::initialized(), "initialized() must be false before init");
  check(throws_error([] { arcreduce::rank(); }), "rank() must throw Error before init");
  check(throws_error([] { arcreduce::size(); }), "size() must throw Error before init");
  check(arcreduce::stats().ops_completed == 0, "stats() must be zero before init");
  check_rejected_when_not_running("before_init");

  set_stage("init");
  try {
    arcreduce::init();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] FAIL: init() threw: %s\n", g_rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  check(arcreduce::initialized(), "initialized() must be true after init");
  check(arcreduce::rank() == g_rank && arcreduce::size() == size, "rank()/size() wrong");

  set_stage("first op");
  {
    TestTensor t(arcreduce::DType::kFloat32, {5});
    arcreduce_test::fill_inputs(t, g_rank, 0);
    Status s = arcreduce::allreduce("first", t.view(), arcreduce_test::dense());
    check(s.ok(), "first op: " + describe(s));
    check(arcreduce_test::check_reduced(t, arcreduce::ReduceOp::kAverage, size, 0).empty(),
          "first op: wrong result");
  }

  if (during_traffic) {
    set_stage("traffic until shutdown");
    traffic_until_shutdown(shutdown_rank, size);
  } else {
    run_pending_ops_case(shutdown_rank);
  }
  check_rejected_when_not_running("after_shutdown");
  arcreduce::shutdown();  // idempotent
  check_rejected_when_not_running("after_second_shutdown");

  return arcreduce_test::finish(watchdog, g_rank, g_failures);
}

namespace {

void run_pending_ops_case(int shutdown_rank) {
  set_stage("submit pending");
  Pending mine, root_only;
  mine.submit("orphan_of_rank" + std::to_string(g_rank));
  if (g_rank == 0) root_only.submit("only_on_rank_zero");
  MPI_Barrier(MPI_COMM_WORLD);  // everybody's pending ops are submitted
  check(!arcreduce::poll(mine.handle), "orphan op completed although no other rank submitted it");
  // Every rank has looked before any shuts down: a shutdown right after the first barrier could
  // complete a slower rank's orphan op (with kShutdown, correctly) before that rank's check.
  MPI_Barrier(MPI_COMM_WORLD);

  if (shutdown_rank < 0) {
    set_stage("shutdown (all ranks, helper blocked in synchronize)");
    Status helper_status;
    std::thread helper([&] { helper_status = arcreduce::synchronize(mine.handle); });
    // A second thread keeps submitting while shutdown() runs: each of its ops must complete
    // exactly once, OK or kShutdown, and it must see kShutdown in the end.
    std::vector<std::unique_ptr<Pending>> racers;
    std::atomic<bool> racer_saw_shutdown{false};
    std::thread racer([&] {
      for (int i = 0; i < 100000 && !racer_saw_shutdown; ++i) {
        racers.push_back(std::make_unique<Pending>());
        racers.back()->submit("racer/" + std::to_string(i));
        Status s = arcreduce::synchronize(racers.back()->handle);
        if (s.code() == StatusCode::kShutdown) racer_saw_shutdown = true;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    arcreduce::shutdown();
    helper.join();
    racer.join();
    check(racer_saw_shutdown.load(), "the racing submitter never saw kShutdown");
    for (auto& r : racers) {
      check(r->count() == 1, "racing op: callback fired " + std::to_string(r->count()) +
                                 " times, want exactly once");
      check(r->get().ok() || r->get().code() == StatusCode::kShutdown,
            "racing op: " + describe(r->get()));
    }
    std::fprintf(stderr, "[rank %d] racing submitter completed %zu ops\n", g_rank, racers.size());
    check(is_shutdown(helper_status),
          "synchronize blocked in another thread gave " + describe(helper_status));
    check_completed_with_shutdown(mine, "pending op");
  } else if (g_rank == shutdown_rank) {
    set_stage("shutdown (this rank only)");
    arcreduce::shutdown();
    check_completed_with_shutdown(mine, "pending op");
    Status s = arcreduce::synchronize(mine.handle);
    check(is_shutdown(s), "pending op synchronize gave " + describe(s));
  } else {
    set_stage("waiting for the remote shutdown");
    Status s = arcreduce::synchronize(mine.handle);
    check(is_shutdown(s), "pending op after rank " + std::to_string(shutdown_rank) +
                              " shut down: synchronize gave " + describe(s));
    check_completed_with_shutdown(mine, "pending op");
    // The runtime is down here too: new ops fail at once instead of waiting for the dead one.
    set_stage("op after the remote shutdown");
    Pending late;
    late.submit("after_remote_shutdown");
    Status ls = arcreduce::synchronize(late.handle);
    check(ls.code() == StatusCode::kShutdown,
          "op submitted after a remote shutdown gave " + describe(ls));
    set_stage("local shutdown after the remote one");
    arcreduce::shutdown();
  }
  if (g_rank == 0) {
    check_completed_with_shutdown(root_only, "rank 0's only_on_rank_zero");
    Status s = arcreduce::synchronize(root_only.handle);
    check(is_shutdown(s), "only_on_rank_zero: synchronize gave " + describe(s));
  }

  check(!arcreduce::initialized(), "initialized() must be false after shutdown");
}

}  // namespace
