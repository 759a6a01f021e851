// In-process transport for tests: every rank is a thread of the test process, collectives
// rendezvous through shared memory. Semantics match MpiCommunicator call for call, including the
// traffic estimates of ops/traffic_estimates.h, so code above the transport can be tested with
// any world size, odd sizes and simulated multi-host layouts without mpirun.
//
//   * Collectives: every rank deposits a snapshot of its input; the last rank to arrive checks
//     that all ranks called the same collective with the same arguments (else the world fails
//     with a message naming both calls) and computes reductions once, in rank order, so all ranks
//     get bit-identical results. Generations keep consecutive collectives apart.
//   * Point-to-point: buffered mailboxes keyed by (src, dst, tag), FIFO; send never blocks and
//     recv requires the message to have exactly the requested size. isend completes at once;
//     irecv is matched when it is waited on (earlier-posted receives of the same source and tag
//     first, so matching follows posting order).
//   * Several ranks per host: with ranks_per_host and a Hierarchy other than kOff, allreduce()
//     goes by host as MpiCommunicator does (allreduce_by_host() decides per message): each
//     host's ranks are summed in rank order, then the hosts' sums in host order; the traffic is
//     the host stages' plus the hosts' first ranks' All-Reduce (MpiCommunicator's leader scheme;
//     its sharded exchange moves the same bytes per host, spread over the host's ranks).
//     allgather()/allgatherv() count their host stages' traffic too (their result is the flat
//     one); exchange_hosts() and reduce_within_host() as MpiCommunicator's. communication_usage()
//     says hosts and hierarchical.
//   * Never hangs: a wait longer than the world's timeout, LoopbackWorld::fail() or abort() fails
//     the world; every waiting and later call then throws arcreduce::Error(kInternal) carrying the
//     first failure reason.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ops/allreduce_algorithm.h"
#include "ops/communicator.h"

namespace arcreduce {

class LoopbackState;

class LoopbackWorld {
 public:
  // `size` ranks. ranks_per_host > 0 places consecutive groups of that many ranks on one
  // simulated host (local_rank/local_size follow); 0 puts all ranks on one host.
  explicit LoopbackWorld(int size, int ranks_per_host = 0,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // The same with `hierarchy` deciding which allreduce() calls sum within each host first
  // (ARCREDUCE_HIERARCHICAL's values; the one-argument form is Hierarchy::kOff: flat).
  LoopbackWorld(int size, int ranks_per_host, Hierarchy hierarchy,
                std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~LoopbackWorld();
  LoopbackWorld(const LoopbackWorld&) = delete;
  LoopbackWorld& operator=(const LoopbackWorld&) = delete;

  int size() const;
  // The communicator of `rank`, to be used by one thread at a time. It shares ownership of the
  // world's state, so it may outlive this object. Throws Error for a rank out of range.
  std::unique_ptr<Communicator> communicator(int rank);

  // Fails the world: current and future waits throw Error(kInternal) with `reason`. Only the
  // first reason is kept. Thread-safe, callable from any thread.
  void fail(const std::string& reason);
  bool failed() const;
  std::string failure_reason() const;

  // Set by Communicator::abort() (which fails the world and returns instead of killing the
  // process); the first call is kept.
  bool aborted() const;
  int abort_code() const;
  std::string abort_reason() const;

 private:
  std::shared_ptr<LoopbackState> state_;
};

// Runs body(communicator of rank r) on world.size() threads, joins them all and rethrows the
// first exception any of them threw (that exception also fails the world, so the other ranks
// wake up instead of waiting for the missing one).
void run_ranks(LoopbackWorld& world, const std::function<void(Communicator&)>& body);
// Same on a fresh world of `size` ranks with the default 60 s timeout.
void run_ranks(int size, const std::function<void(Communicator&)>& body, int ranks_per_host = 0);

}  // namespace arcreduce
