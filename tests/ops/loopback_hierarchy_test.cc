// allreduce() by host over the loopback world (ranks_per_host with a Hierarchy): the sums run
// within each simulated host first, the traffic is the host stages' plus the hosts' first ranks'
// All-Reduce, and the decision per message is allreduce_by_host()'s. References computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/allreduce_algorithm.h"
#include "ops/loopback_communicator.h"

namespace arcreduce {
namespace {

// Rank r's input: large values that cancel across hosts and small ones that vanish beside them,
// so summing by host and summing in rank order round differently.
std::vector<float> input(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    const float big = (i % 3 == 0 ? 1e8f : 3e7f) * static_cast<float>(i % 5 + 1);
    v[i] = rank % 2 == 0 ? (rank % 4 == 0 ? big : -big) : 1.0f + static_cast<float>(i % 7);
  }
  return v;
}

// The sum of `ranks` ranks' inputs, in rank order within each group of `per_host` consecutive
// ranks, then over the groups in order (per_host >= ranks: rank order).
std::vector<float> reference(int ranks, int per_host, size_t count) {
  std::vector<float> total;
  for (int first = 0; first < ranks; first += per_host) {
    std::vector<float> group = input(first, count);
    for (int r = first + 1; r < std::min(ranks, first + per_host); ++r) {
      const std::vector<float> in = input(r, count);
      for (size_t i = 0; i < count; ++i) group[i] += in[i];
    }
    if (first == 0) {
      total = group;
    } else {
      for (size_t i = 0; i < count; ++i) total[i] += group[i];
    }
  }
  return total;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct Outcome {
  std::vector<std::vector<float>> result;  // per rank
  std::vector<TrafficCounters> traffic;    // per rank, of the one allreduce()
  std::vector<CommunicationUsage> usage;   // per rank
};

Outcome run_allreduce(int ranks, int per_host, Hierarchy hierarchy, size_t count) {
  Outcome out;
  out.result.resize(ranks);
  out.traffic.resize(ranks);
  out.usage.resize(ranks);
  LoopbackWorld world(ranks, per_host, hierarchy);
  run_ranks(world, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> buf = input(r, count);
    comm.allreduce(buf.data(), count, ScalarType::kFloat32, CollectiveOp::kSum);
    out.result[r] = buf;
    out.traffic[r] = comm.traffic();
    out.usage[r] = comm.communication_usage();
  });
  return out;
}

// Hosts of `per_host` consecutive ranks, the last one possibly smaller.
struct Layout {
  int ranks, per_host;
};
const Layout kLayouts[] = {{4, 2}, {3, 2}, {5, 2}, {8, 4}, {6, 3}, {7, 3}};

TEST(LoopbackHierarchy, OnSumsWithinHostsFirstOnEveryRank) {
  for (const Layout& l : kLayouts) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{37}}) {
      const Outcome out = run_allreduce(l.ranks, l.per_host, Hierarchy::kOn, count);
      const std::vector<float> want = reference(l.ranks, l.per_host, count);
      for (int r = 0; r < l.ranks; ++r) {
        EXPECT_TRUE(same_bits(out.result[r], want))
            << l.ranks << " ranks, " << l.per_host << " per host, count " << count << ", rank "
            << r;
        EXPECT_TRUE(out.usage[r].hierarchical);
        EXPECT_EQ(out.usage[r].hosts, (l.ranks + l.per_host - 1) / l.per_host);
      }
    }
  }
  // The inputs tell the two orders apart, so the check above sees which one ran.
  EXPECT_FALSE(same_bits(reference(4, 2, 37), reference(4, 4, 37)));
}

TEST(LoopbackHierarchy, OffAndOneHostStayFlat) {
  for (const Layout& l : kLayouts) {
    const Outcome off = run_allreduce(l.ranks, l.per_host, Hierarchy::kOff, 37);
    const Outcome one_host = run_allreduce(l.ranks, l.ranks, Hierarchy::kOn, 37);
    const Outcome one_per_host = run_allreduce(l.ranks, 1, Hierarchy::kOn, 37);
    const std::vector<float> flat = reference(l.ranks, l.ranks, 37);
    for (int r = 0; r < l.ranks; ++r) {
      EXPECT_TRUE(same_bits(off.result[r], flat)) << l.ranks << "/" << l.per_host << " rank " << r;
      EXPECT_TRUE(same_bits(one_host.result[r], flat));
      EXPECT_TRUE(same_bits(one_per_host.result[r], flat));
      EXPECT_FALSE(off.usage[r].hierarchical);
      EXPECT_FALSE(one_host.usage[r].hierarchical);
      EXPECT_FALSE(one_per_host.usage[r].hierarchical);
      EXPECT_EQ(one_host.usage[r].hosts, 1);
      EXPECT_EQ(one_per_host.usage[r].hosts, l.ranks);
    }
  }
}

// Reference traffic per rank of a broadcast of `bytes` from rank 0 in a flat world of `ranks`.
std::vector<TrafficCounters> broadcast_traffic_of(int ranks, size_t bytes) {
  std::vector<TrafficCounters> traffic(ranks);
  run_ranks(ranks, [&](Communicator& comm) {
    std::vector<char> buf(bytes);
    comm.broadcast(buf.data(), bytes, 0);
    traffic[comm.rank()] = comm.traffic();
  });
  return traffic;
}

// A host's other ranks send the message to its first rank, which receives it from each; the
// first ranks take part in an All-Reduce among themselves, whose traffic is that of a flat world
// of one rank per host; the result goes back as a broadcast within the host.
TEST(LoopbackHierarchy, TrafficIsTheHostStagesPlusTheFirstRanksAllReduce) {
  const size_t count = 1000, bytes = count * sizeof(float);
  for (const Layout& l : kLayouts) {
    const int hosts = (l.ranks + l.per_host - 1) / l.per_host;
    const Outcome by_host = run_allreduce(l.ranks, l.per_host, Hierarchy::kOn, count);
    const Outcome leaders = run_allreduce(hosts, 1, Hierarchy::kOff, count);
    for (int r = 0; r < l.ranks; ++r) {
      const int host = r / l.per_host, local = r % l.per_host;
      const int local_size = std::min(l.per_host, l.ranks - host * l.per_host);
      uint64_t sent = 0, received = 0;
      if (local_size > 1) {
        const TrafficCounters back = broadcast_traffic_of(local_size, bytes)[local];
        sent += (local > 0 ? bytes : 0) + back.bytes_sent;
        received += (local == 0 ? bytes * (local_size - 1) : 0) + back.bytes_received;
      }
      if (local == 0) {
        sent += leaders.traffic[host].bytes_sent;
        received += leaders.traffic[host].bytes_received;
      }
      const TrafficCounters& t = by_host.traffic[r];
      EXPECT_EQ(t.calls, 1u);
      EXPECT_EQ(t.bytes_sent, sent) << l.ranks << "/" << l.per_host << " rank " << r;
      EXPECT_EQ(t.bytes_received, received) << l.ranks << "/" << l.per_host << " rank " << r;
    }
  }
}

// By host an All-Gather's result is the flat one; its blocks cross each host's link once: the
// host's other ranks send theirs to its first rank, the first ranks All-Gather their hosts'
// blocks (a flat world of one rank per host), and the result goes back within the host.
TEST(LoopbackHierarchy, AllgatherByHostCountsItsStages) {
  for (const Layout& l : kLayouts) {
    const int hosts = (l.ranks + l.per_host - 1) / l.per_host;
    std::vector<size_t> sizes(l.ranks);
    for (int r = 0; r < l.ranks; ++r) sizes[r] = 100 + 37 * r;
    size_t total = 0;
    for (size_t b : sizes) total += b;
    std::vector<size_t> host_bytes(hosts, 0);
    for (int r = 0; r < l.ranks; ++r) host_bytes[r / l.per_host] += sizes[r];
    std::vector<TrafficCounters> by_host(l.ranks), leaders(hosts);
    std::vector<std::vector<char>> gathered(l.ranks);
    LoopbackWorld world(l.ranks, l.per_host, Hierarchy::kAuto);
    run_ranks(world, [&](Communicator& comm) {
      const int r = comm.rank();
      std::vector<char> block(sizes[r], static_cast<char>('a' + r));
      gathered[r].resize(total);
      comm.allgatherv(block.data(), gathered[r].data(), sizes);
      by_host[r] = comm.traffic();
    });
    run_ranks(hosts, [&](Communicator& comm) {
      std::vector<char> block(host_bytes[comm.rank()]), all(total);
      comm.allgatherv(block.data(), all.data(), host_bytes);
      leaders[comm.rank()] = comm.traffic();
    });
    std::vector<char> flat;
    for (int r = 0; r < l.ranks; ++r) flat.insert(flat.end(), sizes[r], static_cast<char>('a' + r));
    for (int r = 0; r < l.ranks; ++r) {
      EXPECT_EQ(gathered[r], flat);
      const int host = r / l.per_host, local = r % l.per_host;
      const int local_size = std::min(l.per_host, l.ranks - host * l.per_host);
      uint64_t sent = 0, received = 0;
      if (local_size > 1) {
        const TrafficCounters back = broadcast_traffic_of(local_size, total)[local];
        sent += back.bytes_sent;
        received += back.bytes_received;
      }
      if (local == 0) {
        sent += leaders[host].bytes_sent;
        received += leaders[host].bytes_received + host_bytes[host] - sizes[r];
      } else {
        sent += sizes[r];
      }
      EXPECT_EQ(by_host[r].bytes_sent, sent) << l.ranks << "/" << l.per_host << " rank " << r;
      EXPECT_EQ(by_host[r].bytes_received, received)
          << l.ranks << "/" << l.per_host << " rank " << r;
    }
  }
}

// Under kAuto a message goes by host where the ring would carry it between the hosts.
TEST(LoopbackHierarchy, AutoSendsByHostWhatTheRingCarriesBetweenHosts) {
  const size_t small = 16;
  const size_t large = kRingThresholdBytes / sizeof(float);
  for (const Layout& l : {Layout{6, 2}, Layout{8, 4}}) {  // 3 and 2 hosts
    const int hosts = (l.ranks + l.per_host - 1) / l.per_host;
    for (size_t count : {small, large, 2 * large, 4 * large}) {
      const bool by_host =
          allreduce_by_host(Hierarchy::kAuto, count * sizeof(float), hosts, kRingThresholdBytes);
      const Outcome out = run_allreduce(l.ranks, l.per_host, Hierarchy::kAuto, count);
      const std::vector<float> want = reference(l.ranks, by_host ? l.per_host : l.ranks, count);
      for (int r = 0; r < l.ranks; ++r) {
        ASSERT_TRUE(same_bits(out.result[r], want))
            << l.ranks << "/" << l.per_host << " count " << count << " rank " << r;
      }
    }
  }
  EXPECT_FALSE(allreduce_by_host(Hierarchy::kAuto, small * 4, 3, kRingThresholdBytes));
  EXPECT_TRUE(allreduce_by_host(Hierarchy::kAuto, large * 4, 3, kRingThresholdBytes));
  // Two hosts: the ring takes over from the two-rank threshold.
  EXPECT_FALSE(
      allreduce_by_host(Hierarchy::kAuto, kTwoRankRingThresholdBytes - 1, 2, kRingThresholdBytes));
  EXPECT_TRUE(
      allreduce_by_host(Hierarchy::kAuto, kTwoRankRingThresholdBytes, 2, kRingThresholdBytes));
  EXPECT_TRUE(allreduce_by_host(Hierarchy::kOn, 1, 2, kRingThresholdBytes));
  EXPECT_FALSE(allreduce_by_host(Hierarchy::kOff, large * 4, 3, kRingThresholdBytes));
  EXPECT_FALSE(allreduce_by_host(Hierarchy::kOn, large * 4, 1, kRingThresholdBytes));
}

}  // namespace
}  // namespace arcreduce
