// Rabenseifner's allreduce over MPI point-to-point: a reduce-scatter by recursive halving, then an
// all-gather by recursive doubling. Like the ring it sends 2 (p - 1) / p of the message, but in
// 2 log2 p rounds instead of 2 (P - 1), p being the largest power of two <= P. A size other than
// a power of two folds 2 (P - p) ranks into partners first, as doubling_allreduce does, which
// costs one whole-message exchange before and one after. For messages across hosts too large for
// doubling's log2 P copies and too small for the ring's rounds (ops/link_model.h decides).
//
// Bit-identical on every rank: at each halving round a rank keeps one half of its segment and
// reduces into it what its partner sends of that half (dst = dst op received), so every element is
// reduced along one tree and its final value computed once, by its owner, then copied to all.
// The rounds go by increasing distance (1, 2, 4, ...), as doubling_allreduce's do, so the tree is
// doubling's: the two algorithms give the same bits, and choosing between them by a measured link
// never changes a result (tested in communicator_mpi_test).
#pragma once

#include "ops/mpi_include.h"

#include <cstddef>
#include <vector>

#include "ops/communicator.h"
#include "ops/mpi_wait.h"

namespace arcreduce {

// In place on `buf` (`count` elements of `type`, same count/type/op on every rank of `comm`).
// `count` * scalar_size(type) must be at most INT_MAX bytes. Every message travels in pieces of
// at most `segment_bytes`, all posted at once: across hosts pieces within Open MPI's eager limit
// need no rendezvous handshake, which a large message's waits behind the link's bulk data (at
// 8 hosts x 100 Mbit/s a 7 MB message took twice the ring's time in whole messages). `comm` must
// carry no other traffic with tag `tag` concurrently. `scratch` is grown to half the buffer (the
// whole buffer on a folding rank) and reused across calls. Returns the exact bytes sent and
// received (calls left 0 for the caller). Throws arcreduce::Error on MPI failure.
TrafficCounters halving_allreduce(MPI_Comm comm, int tag, void* buf, size_t count, ScalarType type,
                                  CollectiveOp op, size_t segment_bytes, std::vector<char>* scratch,
                                  const WaitPolicy& wait = WaitPolicy());

// The element ranges a rank holds after each halving round, for tests: entry k is the segment
// kept in round k (partner at distance 2^k), for the rank at `index` among `p` exchanging ranks
// (p a power of two).
struct HalvingSegment {
  size_t begin = 0;
  size_t end = 0;
};
std::vector<HalvingSegment> halving_segments(size_t count, int index, int p);

}  // namespace arcreduce
