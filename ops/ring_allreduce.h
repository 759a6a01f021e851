// Bandwidth-optimal ring allreduce over MPI point-to-point (reduce-scatter, then all-gather,
// P-1 steps each), segmented so that reducing one segment overlaps the transfer of the next.
//
// Element i is reduced exactly once, by the owner of its chunk, in ring order starting at the
// chunk's index, and then copied to every rank: results are bit-identical on all ranks.
#pragma once

#include "ops/mpi_include.h"

#include <cstddef>
#include <vector>

#include "ops/communicator.h"
#include "ops/mpi_wait.h"

namespace arcreduce {

// In place on `buf` (`count` elements of `type`, same count/type/op on every rank of `comm`).
// `comm` must be used by no one else concurrently (MpiCommunicator gives the ring its own dup);
// `scratch` is grown to 2 chunks and reused across calls, and must outlive the call even when it
// throws. `segment_bytes` (> 0, <= INT_MAX) is the pipelining granularity. Returns the exact
// bytes sent and received (calls left 0 for the caller). `wait` says how to wait for
// messages; its seconds_per_byte (the link's) applies to the receives, each expected to last at
// least its bytes' time over the link, never to the sends. Throws arcreduce::Error on MPI failure.
TrafficCounters ring_allreduce(MPI_Comm comm, void* buf, size_t count, ScalarType type,
                               CollectiveOp op, size_t segment_bytes, std::vector<char>* scratch,
                               const WaitPolicy& wait = WaitPolicy());

}  // namespace arcreduce
