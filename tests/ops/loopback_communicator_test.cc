// Every Communicator call over the in-process loopback world, world sizes 1..8, against
// references computed here.
#include "ops/loopback_communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>

#include "arcreduce/status.h"
#include "test_values.h"

namespace arcreduce {
namespace {

using testing::make_values;

const size_t kCounts[] = {0, 1, 7, 100000};

// Bytes rank r contributes in variable-size calls: zero for some ranks, uneven otherwise.
size_t block_size(int rank, size_t scale) {
  return rank % 3 == 1 ? 0 : (rank + 1) * scale + rank;
}

std::vector<char> pattern(size_t bytes, int seed) {
  std::vector<char> out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>((i * 131 + seed * 17 + 3) & 0xff);
  return out;
}

class LoopbackSizeTest : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }
};

TEST_P(LoopbackSizeTest, RanksAndHosts) {
  run_ranks(size(), [&](Communicator& comm) {
    EXPECT_EQ(comm.size(), size());
    EXPECT_EQ(comm.local_size(), size());
    EXPECT_EQ(comm.local_rank(), comm.rank());
  });
  // Hosts of 3 ranks: 8 ranks -> hosts {0,1,2} {3,4,5} {6,7}.
  run_ranks(
      size(),
      [&](Communicator& comm) {
        const int r = comm.rank();
        EXPECT_EQ(comm.local_rank(), r % 3);
        EXPECT_EQ(comm.local_size(), std::min(3, size() - r / 3 * 3));
      },
      3);
}

TEST_P(LoopbackSizeTest, AllreduceEveryTypeOpAndCount) {
  for (ScalarType type : testing::all_types()) {
    for (CollectiveOp op : testing::all_ops()) {
      for (size_t count : kCounts) {
        if (count == 100000 && op != CollectiveOp::kSum && op != CollectiveOp::kMax) continue;
        const std::vector<char> expected =
            testing::naive_allreduce(type, op, count, size(), /*exact=*/false);
        std::vector<std::vector<char>> results(size());
        run_ranks(size(), [&](Communicator& comm) {
          std::vector<char> buf = make_values(type, count, comm.rank(), false);
          comm.allreduce(buf.data(), count, type, op);
          results[comm.rank()] = std::move(buf);
        });
        for (int r = 0; r < size(); ++r) {
          ASSERT_EQ(results[r], expected) << scalar_type_name(type) << " " << collective_op_name(op)
                                          << " count " << count << " rank " << r;
        }
      }
    }
  }
}

TEST_P(LoopbackSizeTest, AllgatherAndAllgatherv) {
  for (size_t bytes : kCounts) {
    run_ranks(size(), [&](Communicator& comm) {
      const std::vector<char> mine = pattern(bytes, comm.rank());
      std::vector<char> out(bytes * size(), 'x');
      comm.allgather(mine.data(), bytes, out.data());
      for (int r = 0; r < size(); ++r) {
        ASSERT_TRUE(std::equal(out.begin() + r * bytes, out.begin() + (r + 1) * bytes,
                               pattern(bytes, r).begin()));
      }
    });
    run_ranks(size(), [&](Communicator& comm) {
      std::vector<size_t> sizes(size());
      for (int r = 0; r < size(); ++r) sizes[r] = block_size(r, bytes);
      const std::vector<char> mine = pattern(sizes[comm.rank()], comm.rank());
      std::vector<char> out(std::accumulate(sizes.begin(), sizes.end(), size_t{0}), 'x');
      comm.allgatherv(mine.data(), out.data(), sizes);
      std::vector<char> expected;
      for (int r = 0; r < size(); ++r) {
        const std::vector<char> block = pattern(sizes[r], r);
        expected.insert(expected.end(), block.begin(), block.end());
      }
      ASSERT_EQ(out, expected);
    });
  }
}

TEST_P(LoopbackSizeTest, GathervStringsToEveryRoot) {
  for (int root = 0; root < size(); ++root) {
    run_ranks(size(), [&](Communicator& comm) {
      const std::vector<char> bytes = pattern(block_size(comm.rank(), 50), comm.rank());
      std::vector<std::string> blocks;
      comm.gatherv(std::string(bytes.begin(), bytes.end()), comm.rank() == root ? &blocks : nullptr,
                   root);
      if (comm.rank() != root) return;
      ASSERT_EQ(blocks.size(), static_cast<size_t>(size()));
      for (int r = 0; r < size(); ++r) {
        const std::vector<char> b = pattern(block_size(r, 50), r);
        EXPECT_EQ(blocks[r], std::string(b.begin(), b.end()));
      }
    });
  }
}

TEST_P(LoopbackSizeTest, BroadcastBytesAndStrings) {
  for (int root = 0; root < size(); ++root) {
    for (size_t bytes : kCounts) {
      run_ranks(size(), [&](Communicator& comm) {
        std::vector<char> buf =
            comm.rank() == root ? pattern(bytes, root) : std::vector<char>(bytes);
        comm.broadcast(buf.data(), bytes, root);
        ASSERT_EQ(buf, pattern(bytes, root));
        std::string text = comm.rank() == root ? std::string(bytes % 1000, 'a' + root) : "stale";
        comm.broadcast(&text, root);
        EXPECT_EQ(text, std::string(bytes % 1000, 'a' + root));
      });
    }
  }
}

TEST_P(LoopbackSizeTest, Alltoallv) {
  // Rank s sends (s + 2d) % 5 * 11 bytes to rank d, each byte tagged with (s, d).
  const auto amount = [](int s, int d) { return static_cast<size_t>((s + 2 * d) % 5 * 11); };
  run_ranks(size(), [&](Communicator& comm) {
    const int me = comm.rank();
    std::vector<size_t> send_bytes(size()), recv_bytes(size());
    std::vector<char> send;
    for (int d = 0; d < size(); ++d) {
      send_bytes[d] = amount(me, d);
      recv_bytes[d] = amount(d, me);
      send.insert(send.end(), send_bytes[d], static_cast<char>(me * 16 + d));
    }
    std::vector<char> recv(std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0}));
    comm.alltoallv(send.data(), send_bytes, recv.data(), recv_bytes);
    size_t offset = 0;
    for (int s = 0; s < size(); ++s) {
      for (size_t i = 0; i < recv_bytes[s]; ++i) {
        ASSERT_EQ(recv[offset + i], static_cast<char>(s * 16 + me));
      }
      offset += recv_bytes[s];
    }
  });
}

TEST_P(LoopbackSizeTest, PointToPointRingAndSendrecv) {
  run_ranks(size(), [&](Communicator& comm) {
    const int me = comm.rank(), right = (me + 1) % size(), left = (me - 1 + size()) % size();
    // Several messages on one (src, dst, tag) arrive in FIFO order.
    for (int k = 0; k < 3; ++k) {
      const std::vector<char> msg = pattern(100 + k, me * 10 + k);
      comm.send(msg.data(), msg.size(), right, 5);
    }
    for (int k = 0; k < 3; ++k) {
      std::vector<char> in(100 + k);
      comm.recv(in.data(), in.size(), left, 5);
      ASSERT_EQ(in, pattern(100 + k, left * 10 + k));
    }
    const std::vector<char> out = pattern(1000, me);
    std::vector<char> in(1000);
    comm.sendrecv(out.data(), out.size(), right, in.data(), in.size(), left, 9);
    ASSERT_EQ(in, pattern(1000, left));
    comm.sendrecv(nullptr, 0, right, nullptr, 0, left, 9);  // empty messages
    comm.barrier();
  });
}

TEST_P(LoopbackSizeTest, TrafficCountsBalanceAcrossRanks) {
  std::vector<TrafficCounters> traffic(size());
  run_ranks(size(), [&](Communicator& comm) {
    std::vector<float> buf(1001, 1.0f);
    comm.allreduce(buf.data(), buf.size(), ScalarType::kFloat32, CollectiveOp::kSum);
    std::vector<char> out(64 * size());
    comm.allgather(buf.data(), 64, out.data());
    comm.broadcast(buf.data(), 100, size() - 1);
    const int right = (comm.rank() + 1) % size(), left = (comm.rank() - 1 + size()) % size();
    std::vector<char> in(33);
    comm.sendrecv(buf.data(), 33, right, in.data(), 33, left, 0);
    traffic[comm.rank()] = comm.traffic();
  });
  uint64_t sent = 0, received = 0;
  for (const TrafficCounters& t : traffic) {
    sent += t.bytes_sent;
    received += t.bytes_received;
  }
  EXPECT_EQ(sent, received);
  const uint64_t expected_allreduce = size() > 1 ? 2ull * (size() - 1) * 1001 * 4 : 0;
  const uint64_t expected_allgather = 64ull * size() * (size() - 1);
  const uint64_t expected_broadcast = 100ull * (size() - 1);
  EXPECT_EQ(sent, expected_allreduce + expected_allgather + expected_broadcast + 33ull * size());
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LoopbackSizeTest, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "size" + std::to_string(info.param);
                         });

// fp16/bf16 sums accumulate in fp32 but round to 16 bits after each of the P-1 additions. Each
// rounding is off by at most half an ulp of the partial sum, i.e. u * |partial| with
// u = 2^-11 (fp16) or 2^-8 (bf16), and |partial| <= sum_r |x_r|; so
// |result - exact| <= (P-1) * u * sum_r |x_r|. The inputs are already 16-bit values, so the exact
// sum is computed in double without error.
TEST(LoopbackHalfSumTest, MatchesFp32ReferenceWithinRoundingBound) {
  const int size = 4;
  const size_t count = 20000;
  for (ScalarType type : {ScalarType::kFloat16, ScalarType::kBFloat16}) {
    const double u = type == ScalarType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const auto to_float = type == ScalarType::kFloat16 ? fp16_to_float : bf16_to_float;
    std::vector<std::vector<char>> results(size);
    run_ranks(size, [&](Communicator& comm) {
      std::vector<char> buf = make_values(type, count, comm.rank(), false, 42);
      comm.allreduce(buf.data(), count, type, CollectiveOp::kSum);
      results[comm.rank()] = std::move(buf);
    });
    std::vector<std::vector<char>> inputs;
    for (int r = 0; r < size; ++r) inputs.push_back(make_values(type, count, r, false, 42));
    double worst = 0;
    for (size_t i = 0; i < count; ++i) {
      double exact = 0, magnitude = 0;
      for (int r = 0; r < size; ++r) {
        const double x = to_float(testing::load<uint16_t>(&inputs[r][2 * i]));
        exact += x;
        magnitude += std::fabs(x);
      }
      const double got = to_float(testing::load<uint16_t>(&results[0][2 * i]));
      const double bound = (size - 1) * u * magnitude;
      ASSERT_LE(std::fabs(got - exact), bound) << scalar_type_name(type) << " element " << i;
      if (magnitude > 0) worst = std::max(worst, std::fabs(got - exact) / magnitude);
    }
    for (int r = 1; r < size; ++r) EXPECT_EQ(results[r], results[0]);
    EXPECT_GT(worst, 0.0) << "inputs should exercise rounding";
  }
}

TEST(LoopbackFailureTest, MismatchedCollectivesFailEveryRank) {
  try {
    run_ranks(2, [](Communicator& comm) {
      if (comm.rank() == 0) {
        float x = 1;
        comm.allreduce(&x, 1, ScalarType::kFloat32, CollectiveOp::kSum);
      } else {
        comm.barrier();
      }
    });
    FAIL() << "mismatch not detected";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("allreduce(count=1, type=float32, op=sum)"), std::string::npos)
        << message;
    EXPECT_NE(message.find("barrier"), std::string::npos) << message;
  }
}

TEST(LoopbackFailureTest, MissingRankTimesOutNamingIt) {
  LoopbackWorld world(3, 0, std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(run_ranks(world,
                         [](Communicator& comm) {
                           if (comm.rank() != 2) comm.barrier();
                         }),
               Error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(world.failed());
  EXPECT_NE(world.failure_reason().find("waiting for rank(s) 2"), std::string::npos)
      << world.failure_reason();
}

TEST(LoopbackFailureTest, RecvWithoutSenderTimesOut) {
  LoopbackWorld world(2, 0, std::chrono::milliseconds(100));
  std::unique_ptr<Communicator> comm = world.communicator(1);
  char byte;
  EXPECT_THROW(comm->recv(&byte, 1, 0, 3), Error);
  EXPECT_NE(world.failure_reason().find("recv(src=0, tag=3)"), std::string::npos);
}

TEST(LoopbackFailureTest, FailWakesAllWaitersAndLaterCalls) {
  LoopbackWorld world(4);
  std::atomic<int> woken{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm = world.communicator(r);
      try {
        comm->barrier();
      } catch (const Error& e) {
        if (std::string(e.what()).find("operator gave up") != std::string::npos) ++woken;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  world.fail("operator gave up");
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(woken.load(), 3);
  std::unique_ptr<Communicator> late = world.communicator(3);
  EXPECT_THROW(late->barrier(), Error);
  char byte = 0;
  EXPECT_THROW(late->send(&byte, 1, 0, 0), Error);
}

TEST(LoopbackFailureTest, ThrowingRankWakesOthersAndItsExceptionIsRethrown) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(run_ranks(5,
                         [](Communicator& comm) {
                           if (comm.rank() == 3) throw std::runtime_error("rank 3 broke");
                           comm.barrier();
                         }),
               std::runtime_error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(LoopbackFailureTest, AbortIsRecordedAndFailsTheWorld) {
  LoopbackWorld world(3);
  EXPECT_THROW(run_ranks(world,
                         [](Communicator& comm) {
                           if (comm.rank() == 1) comm.abort(7, "stalled on tensor w");
                           comm.barrier();
                         }),
               Error);
  EXPECT_TRUE(world.aborted());
  EXPECT_EQ(world.abort_code(), 7);
  EXPECT_EQ(world.abort_reason(), "stalled on tensor w");
  EXPECT_NE(world.failure_reason().find("abort(7)"), std::string::npos);
}

TEST(LoopbackFailureTest, SizeMismatchesAreErrors) {
  EXPECT_THROW(run_ranks(2,
                         [](Communicator& comm) {
                           char buf[8] = {};
                           if (comm.rank() == 0) comm.send(buf, 8, 1, 0);
                           if (comm.rank() == 1) comm.recv(buf, 4, 0, 0);
                         }),
               Error);
  EXPECT_THROW(run_ranks(2,
                         [](Communicator& comm) {
                           char buf[8] = {};
                           const std::vector<size_t> send = {2, 2};
                           const std::vector<size_t> recv = {2, comm.rank() == 0 ? 3u : 2u};
                           comm.alltoallv(buf, send, buf, recv);
                         }),
               Error);
}

TEST(LoopbackFailureTest, BadArgumentsThrowWithoutTouchingTheWorld) {
  LoopbackWorld world(2);
  std::unique_ptr<Communicator> comm = world.communicator(0);
  char byte = 0;
  EXPECT_THROW(comm->send(&byte, 1, 2, 0), Error);
  EXPECT_THROW(comm->send(&byte, 1, 1, -1), Error);
  EXPECT_THROW(comm->broadcast(&byte, 1, -1), Error);
  EXPECT_THROW(comm->allreduce(nullptr, 3, ScalarType::kFloat32, CollectiveOp::kSum), Error);
  EXPECT_THROW(comm->allgatherv(&byte, &byte, {1}), Error);
  EXPECT_THROW(world.communicator(2), Error);
  EXPECT_THROW(LoopbackWorld(0), Error);
  EXPECT_FALSE(world.failed());
}

TEST(LoopbackTest, ConsecutiveCollectivesDoNotMix) {
  // Many back-to-back collectives with ranks racing ahead: each result must be its own.
  run_ranks(6, [](Communicator& comm) {
    for (int i = 0; i < 300; ++i) {
      int64_t v = comm.rank() + i;
      comm.allreduce(&v, 1, ScalarType::kInt64, CollectiveOp::kSum);
      ASSERT_EQ(v, 15 + 6 * i);
      int64_t root_value = i;
      comm.broadcast(&root_value, sizeof(root_value), i % 6);
      ASSERT_EQ(root_value, i);
    }
  });
}

}  // namespace
}  // namespace arcreduce
