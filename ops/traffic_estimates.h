// Bytes on the wire per rank, for Stats. Point-to-point calls and our ring count exactly what
// they move. Calls delegated to MPI collectives (whose internal algorithm we cannot observe) are
// counted as if run by the bandwidth-optimal algorithm named below, so numbers are comparable
// across transports, algorithms and runs:
//   allreduce   ring reduce-scatter + all-gather: sum of the 2(P-1) chunks this rank forwards,
//               about 2(P-1)/P * bytes each way
//   allgather(v) ring: sent = total - block of the right neighbour, received = total - own block
//   broadcast   pipelined chain root, root+1, ...: every rank but the root receives `bytes`,
//               every rank but the chain's last sends `bytes`
//   gatherv     direct: every non-root sends its block (plus an 8-byte size), root receives them
//   alltoallv   exact (blocks to and from other ranks)
//   by host     the host stages' estimates (gather to the host's first rank, broadcast back)
//               plus the first ranks' All-Gather of their hosts' parts
//   barrier     0
// With one rank every count is 0.
#pragma once

#include <cstddef>
#include <vector>

#include "ops/communicator.h"

namespace arcreduce {

// Chunk `index` of `count` elements split over `size` ranks: the first count % size chunks hold
// one element more. Shared by the ring and its traffic estimate.
struct RingChunk {
  size_t offset = 0;
  size_t count = 0;
};
RingChunk ring_chunk(size_t count, int size, int index);

TrafficCounters allreduce_traffic(size_t count, size_t element_bytes, int size, int rank);
TrafficCounters allgatherv_traffic(const std::vector<size_t>& block_bytes, int rank);
TrafficCounters broadcast_traffic(size_t bytes, int size, int rank, int root);
// On non-root ranks only block_bytes[rank] and block_bytes.size() are read.
TrafficCounters gatherv_traffic(const std::vector<size_t>& block_bytes, int rank, int root);
TrafficCounters alltoallv_traffic(const std::vector<size_t>& send_bytes,
                                  const std::vector<size_t>& recv_bytes, int rank);
// A reduce of `bytes` within a host into its first rank (local_rank 0), direct: every other rank
// sends its buffer, the first rank receives local_size - 1 of them.
TrafficCounters reduce_to_first_traffic(size_t bytes, int local_size, int local_rank);
// An All-Gather by host (MpiCommunicator's, the loopback world's): the host's other ranks send
// their blocks to its first rank (local_rank 0), the first ranks All-Gather their hosts' parts
// (host_bytes[h]: the sum of host h's blocks; `host`: this rank's), and the whole result goes back
// as a broadcast within the host.
TrafficCounters allgatherv_by_host_traffic(const std::vector<size_t>& block_bytes,
                                           const std::vector<size_t>& host_bytes, int rank,
                                           int host, int local_rank, int local_size);

inline void add_traffic(TrafficCounters* total, const TrafficCounters& delta) {
  total->bytes_sent += delta.bytes_sent;
  total->bytes_received += delta.bytes_received;
}

}  // namespace arcreduce
