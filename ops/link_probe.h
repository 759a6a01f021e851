// Measures the link model (ops/link_model.h) between ring neighbours. Collective over `comm`:
// every rank calls it with the same `tag`, which `comm` must carry for nothing else meanwhile.
//
// All ranks send to the right neighbour and receive from the left one at once, as a ring round
// does: a few rounds to open the connections, 12 rounds of 8 bytes (each rank's median round is
// its latency), then rounds of 64 KiB, 256 KiB, 1 MiB and 4 MiB until one takes 20 ms on the
// slowest rank (the per-byte time is that round's less the latency, over its bytes). Reducing
// 1 MiB of floats times the reduction. Then each of ring, rabenseifner and doubling runs a tiny
// message (the median of five) and a bulk one (the faster of two) that the ring would move in
// about 50 ms at that rate (64 KiB to 16 MiB), for its line (LinkModel::ring, ...; messages in
// pieces of `segment_bytes`). Every number is the largest over the ranks (the slowest link and CPU
// set the pace of every algorithm), so all ranks hold the same model. It costs about 0.2-0.4 s.
// Returns a model with measured = false where the link's numbers are unusable (not finite, not
// positive), and an algorithm's line zeroed where its own are. Throws arcreduce::Error on MPI
// failure.
#pragma once

#include "ops/mpi_include.h"

#include "ops/link_model.h"
#include "ops/mpi_wait.h"

namespace arcreduce {

LinkModel probe_link(MPI_Comm comm, int tag, size_t segment_bytes, const WaitPolicy& wait);

}  // namespace arcreduce
