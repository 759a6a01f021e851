#include "compressors/oktopk_exchange.h"

#include <algorithm>
#include <cstring>

#include "arcreduce/status.h"
#include "compressors/oktopk_rules.h"

namespace arcreduce {
namespace oktopk {

void rotated_exchange(Communicator& comm, const uint8_t* send,
                      const std::vector<size_t>& send_bytes, const std::vector<size_t>& recv_bytes,
                      int tag, int max_in_flight,
                      const std::function<void(int, const uint8_t*, size_t)>& consume) {
  const int ranks = comm.size(), rank = comm.rank();
  std::vector<size_t> send_offset(ranks, 0), recv_offset(ranks, 0);
  size_t recv_total = 0;
  for (int q = 0; q < ranks; ++q) {
    if (q > 0) send_offset[q] = send_offset[q - 1] + send_bytes[q - 1];
    recv_offset[q] = recv_total;
    if (q != rank) recv_total += recv_bytes[q];
  }
  std::vector<uint8_t> received(recv_total);
  std::vector<P2pRequest> sends(ranks), receives(ranks);
  auto post = [&](int step) {
    const int src = (rank - step + ranks) % ranks, dst = (rank + step) % ranks;
    if (recv_bytes[src] > 0) {
      receives[src] = comm.irecv(received.data() + recv_offset[src], recv_bytes[src], src, tag);
    }
    if (send_bytes[dst] > 0) {
      sends[dst] = comm.isend(send + send_offset[dst], send_bytes[dst], dst, tag);
    }
  };
  const int ahead = std::max(1, max_in_flight);
  for (int step = 1; step < ranks && step <= ahead; ++step) post(step);
  try {
    for (int step = 1; step < ranks; ++step) {
      const int src = (rank - step + ranks) % ranks, dst = (rank + step) % ranks;
      comm.wait(&receives[src]);
      comm.wait(&sends[dst]);
      if (step + ahead < ranks) post(step + ahead);
      if (recv_bytes[src] > 0) consume(src, received.data() + recv_offset[src], recv_bytes[src]);
    }
  } catch (...) {
    // Leave no request behind pointing into `received`; the first error is the one reported.
    for (int q = 0; q < ranks; ++q) {
      try {
        comm.wait(&receives[q]);
        comm.wait(&sends[q]);
      } catch (...) {
      }
    }
    throw;
  }
}

void gather_blocks(Communicator& comm, const uint8_t* mine, const std::vector<size_t>& block_bytes,
                   size_t record_bytes, bool balance, int tag, uint8_t* out) {
  const int ranks = comm.size(), rank = comm.rank();
  if (!balance || ranks == 1) {
    comm.allgatherv(mine, out, block_bytes);
    return;
  }
  // Records [start[q], start[q + 1]) of the concatenation are rank q's; pieces[c] of the even cut
  // go to rank c.
  std::vector<int64_t> start(ranks + 1, 0);
  for (int q = 0; q < ranks; ++q) {
    start[q + 1] = start[q] + static_cast<int64_t>(block_bytes[q] / record_bytes);
  }
  const std::vector<int64_t> piece = even_boundaries(start[ranks], ranks);
  std::vector<uint8_t> own(static_cast<size_t>(piece[rank + 1] - piece[rank]) * record_bytes);
  std::vector<P2pRequest> requests;
  auto overlap = [](int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
    return std::make_pair(std::max(a0, b0), std::min(a1, b1));
  };
  try {
    for (int q = 0; q < ranks; ++q) {  // what rank q holds of my piece
      const auto [lo, hi] = overlap(start[q], start[q + 1], piece[rank], piece[rank + 1]);
      if (lo >= hi) continue;
      uint8_t* at = own.data() + static_cast<size_t>(lo - piece[rank]) * record_bytes;
      const size_t bytes = static_cast<size_t>(hi - lo) * record_bytes;
      if (q == rank) {
        std::memcpy(at, mine + static_cast<size_t>(lo - start[rank]) * record_bytes, bytes);
      } else {
        requests.push_back(comm.irecv(at, bytes, q, tag));
      }
    }
    for (int c = 0; c < ranks; ++c) {  // what I hold of rank c's piece
      if (c == rank) continue;
      const auto [lo, hi] = overlap(start[rank], start[rank + 1], piece[c], piece[c + 1]);
      if (lo >= hi) continue;
      requests.push_back(comm.isend(mine + static_cast<size_t>(lo - start[rank]) * record_bytes,
                                    static_cast<size_t>(hi - lo) * record_bytes, c, tag));
    }
    for (P2pRequest& request : requests) comm.wait(&request);
  } catch (...) {
    for (P2pRequest& request : requests) {
      try {
        comm.wait(&request);
      } catch (...) {
      }
    }
    throw;
  }
  std::vector<size_t> piece_bytes(ranks);
  for (int c = 0; c < ranks; ++c) {
    piece_bytes[c] = static_cast<size_t>(piece[c + 1] - piece[c]) * record_bytes;
  }
  comm.allgatherv(own.data(), out, piece_bytes);
}

}  // namespace oktopk
}  // namespace arcreduce
