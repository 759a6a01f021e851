// Runs one arcreduce Runtime per thread-rank over a LoopbackWorld, so negotiation, caching,
// fusion and reduction are tested in-process at any world size.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "arcreduce/config.h"
#include "ops/loopback_communicator.h"
#include "runtime/runtime.h"

namespace arcreduce {
namespace testing {

// A quiet, fast default for tests.
inline Config test_config() {
  Config c;
  c.compressor = "none";
  c.log_level = "error";
  c.cycle_time_ms = 0.5;
  // Tests that set a compressor check what it computes: no switching to dense behind their
  // backs (compression_choice_test.cc tests the switch).
  c.auto_compress = false;
  return c;
}

// Constructs a Runtime per rank (collectively), runs body(runtime, rank) on each thread, destroys
// the runtimes (which shuts them down) and rethrows the first exception of any rank. A throwing
// rank fails the world so the others cannot wait forever.
inline void run_runtimes(LoopbackWorld& world, const std::vector<Config>& configs,
                         const std::function<void(Runtime&, int)>& body) {
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < world.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        Runtime runtime(configs[r], world.communicator(r));
        body(runtime, r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first) first = std::current_exception();
        world.fail("rank " + std::to_string(r) + " threw");
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

inline void run_runtimes(int size, const Config& config,
                         const std::function<void(Runtime&, int)>& body) {
  LoopbackWorld world(size);
  run_runtimes(world, std::vector<Config>(size, config), body);
}

}  // namespace testing
}  // namespace arcreduce
