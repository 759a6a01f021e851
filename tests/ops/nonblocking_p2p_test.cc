// isend/irecv/wait over the loopback world: rotated exchanges at sizes 1-8, matching in posting
// order, traffic counted at completion, size mismatches and stray waits reported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "arcreduce/status.h"
#include "ops/loopback_communicator.h"

namespace arcreduce {
namespace {

using ::testing::HasSubstr;

std::vector<char> pattern(size_t bytes, int seed) {
  std::vector<char> out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>((i * 131 + seed * 17 + 3) & 0xff);
  return out;
}

// Every rank sends a block of (r + 1) * scale bytes to every other rank, all posted at once,
// completed in reverse posting order.
TEST(NonBlockingP2p, AllPairsExchangeAtEveryWorldSize) {
  for (int world : {1, 2, 3, 5, 8}) {
    for (size_t scale : {size_t{0}, size_t{1}, size_t{1000}}) {
      run_ranks(world, [&](Communicator& comm) {
        const int rank = comm.rank(), size = comm.size();
        const TrafficCounters before = comm.traffic();
        std::vector<std::vector<char>> out(size), in(size);
        std::vector<P2pRequest> requests;
        for (int q = 0; q < size; ++q) {
          if (q == rank) continue;
          in[q].resize((q + 1) * scale);
          out[q] = pattern((rank + 1) * scale, rank * 100 + q);
          requests.push_back(comm.irecv(in[q].data(), in[q].size(), q, 5));
          requests.push_back(comm.isend(out[q].data(), out[q].size(), q, 5));
          EXPECT_TRUE(requests.back().active());
        }
        for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
          comm.wait(&*it);
          EXPECT_FALSE(it->active());
          comm.wait(&*it);  // an inactive request returns at once
        }
        uint64_t received = 0;
        for (int q = 0; q < size; ++q) {
          if (q == rank) continue;
          EXPECT_EQ(in[q], pattern((q + 1) * scale, q * 100 + rank));
          received += in[q].size();
        }
        const TrafficCounters after = comm.traffic();
        EXPECT_EQ(after.bytes_sent - before.bytes_sent, (size - 1) * (rank + 1) * scale);
        EXPECT_EQ(after.bytes_received - before.bytes_received, received);
      });
    }
  }
}

TEST(NonBlockingP2p, ReceivesMatchInPostingOrderAndMixWithBlockingCalls) {
  run_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 0) {
      const std::vector<char> a = pattern(3, 1), b = pattern(5, 2), c = pattern(7, 3);
      P2pRequest first = comm.isend(a.data(), a.size(), 1, 9);
      comm.send(b.data(), b.size(), 1, 9);
      P2pRequest third = comm.isend(c.data(), c.size(), 1, 9);
      comm.wait(&third);
      comm.wait(&first);
    } else {
      std::vector<char> a(3), b(5), c(7);
      P2pRequest ra = comm.irecv(a.data(), a.size(), 0, 9);
      P2pRequest rb = comm.irecv(b.data(), b.size(), 0, 9);
      // Waiting for the second receive first still gives the first message to the first one.
      comm.wait(&rb);
      comm.wait(&ra);
      comm.recv(c.data(), c.size(), 0, 9);
      EXPECT_EQ(a, pattern(3, 1));
      EXPECT_EQ(b, pattern(5, 2));
      EXPECT_EQ(c, pattern(7, 3));
    }
  });
}

TEST(NonBlockingP2p, SizeMismatchAndStrayRequestsThrow) {
  run_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 0) {
      const std::vector<char> a = pattern(4, 1);
      P2pRequest r = comm.isend(a.data(), a.size(), 1, 2);
      comm.wait(&r);
      P2pRequest stray{12345};
      try {
        comm.wait(&stray);
        ADD_FAILURE() << "waited on a request that was never started";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("not in flight"));
      }
      EXPECT_THROW(comm.isend(a.data(), a.size(), 2, 0), Error);  // rank out of range
      EXPECT_THROW(comm.irecv(nullptr, 4, 1, 0), Error);          // null buffer
    } else {
      std::vector<char> a(8);
      P2pRequest r = comm.irecv(a.data(), a.size(), 0, 2);
      try {
        comm.wait(&r);
        ADD_FAILURE() << "accepted a message of another size";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("expected 8 bytes, message has 4"));
      }
    }
  });
}

}  // namespace
}  // namespace arcreduce
