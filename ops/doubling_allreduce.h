// Latency-optimal allreduce over MPI point-to-point (recursive doubling): ceil(log2 P) exchange
// rounds, plus one round before and one after on the 2 (P - 2^floor(log2 P)) ranks that a size
// other than a power of two folds into a partner. For small messages across hosts, where a
// collective costs its rounds' latency and the CPU its waits take: Open MPI's non-blocking
// collectives advance only on every eighth progress call, and over TCP each progress call is a
// poll() of every socket, so a wait for them polls in bursts (ops/mpi_wait.h); the requests
// posted here advance on every call, and each wake-up polls once.
//
// Every round combines two partial results that are the same on both partners, each rank as
// dst = dst op partner's: the operations are commutative, so both partners compute the same bits,
// and results are bit-identical on all ranks (as the ring's and MPI's are).
#pragma once

#include "ops/mpi_include.h"

#include <cstddef>
#include <vector>

#include "ops/communicator.h"
#include "ops/mpi_wait.h"

namespace arcreduce {

// In place on `buf` (`count` elements of `type`, same count/type/op on every rank of `comm`).
// Every message is the whole buffer, so `count` * scalar_size(type) must be at most INT_MAX
// bytes. `comm` must carry no other traffic with tag `tag` concurrently. `scratch` is grown to
// the buffer's size and reused across calls. Returns the exact bytes sent and received (calls
// left 0 for the caller). Throws arcreduce::Error on MPI failure.
TrafficCounters doubling_allreduce(MPI_Comm comm, int tag, void* buf, size_t count, ScalarType type,
                                   CollectiveOp op, std::vector<char>* scratch,
                                   const WaitPolicy& wait = WaitPolicy());

// The rounds of doubling_allreduce on `rank` of `size`: the partner of each exchange, in order,
// and whether the rank only sends first and receives the result last (-1 entries mean no
// exchange). Exposed for tests.
struct DoublingPlan {
  int fold_partner = -1;   // before the exchanges: send to it (folded) or receive from it
  bool folded = false;     // this rank sits the exchanges out and receives the result
  std::vector<int> peers;  // one exchange partner per round (empty when folded)
};
DoublingPlan doubling_plan(int rank, int size);

}  // namespace arcreduce
