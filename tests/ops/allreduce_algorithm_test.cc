#include "ops/allreduce_algorithm.h"

#include <climits>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "arcreduce/status.h"
#include "ops/doubling_allreduce.h"
#include "ops/mpi_communicator.h"
#include "ops/traffic_estimates.h"
#include "runtime/mpi_environment.h"

namespace arcreduce {
namespace {

TEST(AllreduceAlgorithmTest, ParsesAcceptedValues) {
  EXPECT_EQ(parse_allreduce_algorithm("auto"), AllreduceAlgorithm::kAuto);
  EXPECT_EQ(parse_allreduce_algorithm("ring"), AllreduceAlgorithm::kRing);
  EXPECT_EQ(parse_allreduce_algorithm(" MPI "), AllreduceAlgorithm::kMpi);
  EXPECT_EQ(parse_allreduce_algorithm("Doubling"), AllreduceAlgorithm::kDoubling);
  EXPECT_EQ(parse_allreduce_algorithm("Rabenseifner"), AllreduceAlgorithm::kRabenseifner);
  EXPECT_EQ(parse_allreduce_algorithm("thresholds "), AllreduceAlgorithm::kThresholds);
  for (AllreduceAlgorithm a :
       {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kRing, AllreduceAlgorithm::kMpi,
        AllreduceAlgorithm::kDoubling, AllreduceAlgorithm::kRabenseifner,
        AllreduceAlgorithm::kThresholds}) {
    EXPECT_EQ(parse_allreduce_algorithm(allreduce_algorithm_name(a)), a);
  }
}

TEST(HierarchyTest, ParsesItsValuesAndRejectsOthersNamingTheVariable) {
  EXPECT_EQ(parse_hierarchy("auto"), Hierarchy::kAuto);
  EXPECT_EQ(parse_hierarchy(" AUTO "), Hierarchy::kAuto);
  for (const char* off : {"0", "off", "False"}) EXPECT_EQ(parse_hierarchy(off), Hierarchy::kOff);
  for (const char* on : {"1", "on", "TRUE "}) EXPECT_EQ(parse_hierarchy(on), Hierarchy::kOn);
  EXPECT_EQ(parse_hierarchy(" Leader"), Hierarchy::kLeader);
  for (Hierarchy h : {Hierarchy::kAuto, Hierarchy::kOff, Hierarchy::kOn, Hierarchy::kLeader}) {
    EXPECT_EQ(parse_hierarchy(hierarchy_name(h)), h);
  }
  for (const char* bad : {"", "2", "yes please", "hierarchical"}) {
    try {
      parse_hierarchy(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
      const std::string message = e.what();
      EXPECT_NE(message.find("ARCREDUCE_HIERARCHICAL='" + std::string(bad) + "'"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("auto, 0, 1"), std::string::npos) << message;
    }
  }
}

TEST(AllreduceAlgorithmTest, RejectsOtherValuesNamingVariableValueAndChoices) {
  for (const char* bad : {"", "rings", "tree", "0"}) {
    try {
      parse_allreduce_algorithm(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
      const std::string message = e.what();
      EXPECT_NE(message.find("ARCREDUCE_ALLREDUCE_ALGORITHM"), std::string::npos) << message;
      EXPECT_NE(message.find(std::string("'") + bad + "'"), std::string::npos) << message;
      EXPECT_NE(message.find("auto, ring, mpi, doubling, rabenseifner, thresholds"),
                std::string::npos)
          << message;
    }
  }
  EXPECT_THROW(parse_allreduce_algorithm("x", "--allreduce"), Error);
}

TEST(AllreduceAlgorithmTest, AutoPicksRingOrDoublingOnlyAcrossHosts) {
  const size_t mib = size_t{1} << 20;
  const auto resolve = [&](size_t bytes, int size, int local_size) {
    return resolve_allreduce_algorithm(AllreduceAlgorithm::kAuto, bytes, size, local_size, mib);
  };
  EXPECT_EQ(resolve(mib, 8, 4), AllreduceAlgorithm::kRing);
  EXPECT_EQ(resolve(mib - 1, 8, 4), AllreduceAlgorithm::kDoubling);
  EXPECT_EQ(resolve(8, 2, 1), AllreduceAlgorithm::kDoubling);
  // From three ranks the threshold given; at two ranks 1 MiB whatever it is.
  EXPECT_EQ(resolve(mib, 3, 1), AllreduceAlgorithm::kRing);
  EXPECT_EQ(resolve(mib - 1, 3, 1), AllreduceAlgorithm::kDoubling);
  EXPECT_EQ(resolve_allreduce_algorithm(AllreduceAlgorithm::kAuto, mib - 1, 2, 1, 1024),
            AllreduceAlgorithm::kDoubling);
  EXPECT_EQ(resolve_allreduce_algorithm(AllreduceAlgorithm::kAuto, mib, 2, 1, 1024),
            AllreduceAlgorithm::kRing);
  EXPECT_EQ(resolve_allreduce_algorithm(AllreduceAlgorithm::kAuto, 1024, 4, 1, 1024),
            AllreduceAlgorithm::kRing);
  EXPECT_EQ(resolve_allreduce_algorithm(AllreduceAlgorithm::kAuto, 1023, 4, 1, 1024),
            AllreduceAlgorithm::kDoubling);
  // The default: the ring from 256 KiB at four ranks, from 1 MiB at two.
  const auto by_default = [&](size_t bytes, int size) {
    return resolve_allreduce_algorithm(AllreduceAlgorithm::kAuto, bytes, size, 1,
                                       MpiCommunicatorOptions{}.ring_threshold_bytes);
  };
  // Beyond 8 ranks the ring's threshold grows with the ranks (32 KiB a rank's chunk), and
  // Rabenseifner takes the band between: 512 KiB at 16 ranks, 8 MiB at 256.
  for (int size : {16, 256}) {
    const size_t ring = size_t{32 << 10} * size;
    EXPECT_EQ(ring_threshold_for(size, kRingThresholdBytes), ring);
    EXPECT_EQ(by_default(ring, size), AllreduceAlgorithm::kRing) << size;
    EXPECT_EQ(by_default(ring - 1, size), AllreduceAlgorithm::kRabenseifner) << size;
    EXPECT_EQ(by_default(256 << 10, size), AllreduceAlgorithm::kRabenseifner) << size;
    EXPECT_EQ(by_default((256 << 10) - 1, size), AllreduceAlgorithm::kDoubling) << size;
    EXPECT_FALSE(allreduce_by_host(Hierarchy::kAuto, ring - 1, size, kRingThresholdBytes));
    EXPECT_TRUE(allreduce_by_host(Hierarchy::kAuto, ring, size, kRingThresholdBytes));
  }
  for (int size : {3, 5, 8}) {
    EXPECT_EQ(ring_threshold_for(size, kRingThresholdBytes), kRingThresholdBytes);
    EXPECT_EQ(by_default(256 << 10, size), AllreduceAlgorithm::kRing) << size;
  }
  EXPECT_EQ(ring_threshold_for(9, 1024), 1152u);  // 1024 / 8 * 9
  EXPECT_EQ(ring_threshold_for(2, 1024), kTwoRankRingThresholdBytes);
  EXPECT_EQ(by_default(256 << 10, 4), AllreduceAlgorithm::kRing);
  EXPECT_EQ(by_default((256 << 10) - 1, 4), AllreduceAlgorithm::kDoubling);
  EXPECT_EQ(by_default(256 << 10, 2), AllreduceAlgorithm::kDoubling);
  EXPECT_EQ(resolve(100 * mib, 8, 8), AllreduceAlgorithm::kMpi);  // one host
  EXPECT_EQ(resolve(8, 8, 8), AllreduceAlgorithm::kMpi);
  EXPECT_EQ(resolve_allreduce_algorithm(AllreduceAlgorithm::kRing, 1, 1, 1, mib),
            AllreduceAlgorithm::kRing);
  EXPECT_EQ(resolve_allreduce_algorithm(AllreduceAlgorithm::kMpi, mib, 8, 1, mib),
            AllreduceAlgorithm::kMpi);
  EXPECT_EQ(resolve_allreduce_algorithm(AllreduceAlgorithm::kDoubling, 100 * mib, 8, 8, mib),
            AllreduceAlgorithm::kDoubling);
}

TEST(AllreduceAlgorithmTest, RingSegmentsFitTheEagerLimitOnlyAcrossHosts) {
  const size_t mib = size_t{1} << 20;
  EXPECT_EQ(ring_segment_bytes_for(0, 4, 4, INT_MAX), 4 * mib);   // one host
  EXPECT_EQ(ring_segment_bytes_for(0, 1, 4, INT_MAX), mib);       // one rank per host
  EXPECT_EQ(ring_segment_bytes_for(0, 2, 3, INT_MAX), mib);       // uneven hosts
  EXPECT_EQ(ring_segment_bytes_for(1000, 1, 4, INT_MAX), 1000u);  // asked for
  EXPECT_EQ(ring_segment_bytes_for(0, 1, 4, 4096), 4096u);        // message limit
  EXPECT_EQ(ring_segment_bytes_for(0, 1, 4, 0), 1u);
  // A segment across hosts, with Open MPI's fragment header, is one eager message at the limit
  // init() sets.
  EXPECT_LT(kMultiHostRingSegmentBytes + 64, kTcpEagerLimitBytes);
}

// Every rank's plan, checked against the others': exchanges are mutual and happen in the same
// round on both sides, each folded rank hands its data to exactly one partner that exchanges, and
// the exchanges of the power of two p2 <= P that take part combine every rank's data: a rank's
// set of contributors doubles each round, ending at all P.
TEST(DoublingPlanTest, RoundsAreMutualAndCombineEveryRank) {
  for (int size = 1; size <= 13; ++size) {
    int p2 = 1, rounds = 0;
    while (p2 * 2 <= size) {
      p2 *= 2;
      ++rounds;
    }
    std::vector<DoublingPlan> plans;
    for (int r = 0; r < size; ++r) plans.push_back(doubling_plan(r, size));
    std::vector<std::set<int>> has(size);
    int folded = 0;
    for (int r = 0; r < size; ++r) {
      const DoublingPlan& p = plans[r];
      has[r] = {r};
      if (p.folded) {
        ++folded;
        EXPECT_TRUE(p.peers.empty()) << size << " " << r;
        ASSERT_GE(p.fold_partner, 0);
        ASSERT_LT(p.fold_partner, size);
        EXPECT_FALSE(plans[p.fold_partner].folded);
        EXPECT_EQ(plans[p.fold_partner].fold_partner, r);
        continue;
      }
      EXPECT_EQ(static_cast<int>(p.peers.size()), rounds) << size << " " << r;
      if (p.fold_partner >= 0) {
        EXPECT_TRUE(plans[p.fold_partner].folded);
        has[r].insert(p.fold_partner);
      }
    }
    EXPECT_EQ(folded, size - p2) << size;
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::set<int>> next = has;
      for (int r = 0; r < size; ++r) {
        if (plans[r].folded) continue;
        const int peer = plans[r].peers[round];
        ASSERT_GE(peer, 0);
        ASSERT_LT(peer, size);
        ASSERT_NE(peer, r);
        ASSERT_FALSE(plans[peer].folded);
        EXPECT_EQ(plans[peer].peers[round], r) << size << " round " << round;
        next[r].insert(has[peer].begin(), has[peer].end());
      }
      has = next;
    }
    for (int r = 0; r < size; ++r) {
      if (plans[r].folded) continue;
      EXPECT_EQ(static_cast<int>(has[r].size()), size) << size << " " << r;
    }
  }
}

TEST(TrafficEstimatesTest, RingChunksPartitionTheBuffer) {
  for (int size = 1; size <= 9; ++size) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100}, size_t{1001}}) {
      size_t next = 0;
      for (int i = 0; i < size; ++i) {
        const RingChunk c = ring_chunk(count, size, i);
        EXPECT_EQ(c.offset, next);
        EXPECT_LE(c.count, count / size + 1);
        EXPECT_GE(c.count, count / size);
        next += c.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(TrafficEstimatesTest, AllreduceMovesTwiceTheBufferMinusOneShare) {
  // 1000 floats over 4 ranks: 250-element chunks, 6 steps of 1000 bytes each way.
  const TrafficCounters t = allreduce_traffic(1000, 4, 4, 2);
  EXPECT_EQ(t.bytes_sent, 6000u);
  EXPECT_EQ(t.bytes_received, 6000u);
  EXPECT_EQ(allreduce_traffic(1000, 4, 1, 0).bytes_sent, 0u);
  // Totals over ranks balance for uneven chunks.
  uint64_t sent = 0, received = 0;
  for (int r = 0; r < 5; ++r) {
    sent += allreduce_traffic(13, 2, 5, r).bytes_sent;
    received += allreduce_traffic(13, 2, 5, r).bytes_received;
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(sent, 2u * 4u * 13u * 2u);  // each chunk forwarded 2(P-1) times
}

TEST(TrafficEstimatesTest, OtherCollectivesBalance) {
  const std::vector<size_t> blocks = {3, 0, 10, 7};
  TrafficCounters total;
  for (int r = 0; r < 4; ++r) {
    add_traffic(&total, allgatherv_traffic(blocks, r));
    add_traffic(&total, broadcast_traffic(5, 4, r, 1));
    add_traffic(&total, gatherv_traffic(blocks, r, 2));
  }
  EXPECT_EQ(total.bytes_sent, total.bytes_received);
  // allgatherv: every rank receives everything but its own block.
  EXPECT_EQ(allgatherv_traffic(blocks, 2).bytes_received, 10u);
  EXPECT_EQ(allgatherv_traffic(blocks, 2).bytes_sent, 20u - 7u);
}

}  // namespace
}  // namespace arcreduce
