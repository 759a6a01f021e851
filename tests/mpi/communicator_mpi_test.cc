// MpiCommunicator under mpirun: every call against references computed here, results checked
// bit-identical on all ranks. Usage: communicator_mpi_test
// --algorithm=ring|mpi|doubling|rabenseifner|thresholds|auto [--wait=MODE] [--small-messages]
// [--hosts-apart] [--ranks-per-host=N] [--hierarchy=auto|0|1|leader]
// [--hosts-apart] (every rank a host of its own), [--ranks-per-host=N] (ranks [0, N), [N, 2N), ...
// a host each, so that the hierarchical All-Reduce runs on one machine; uneven when N does not
// divide the ranks), [--hierarchy=...] (ARCREDUCE_HIERARCHICAL's values).
// [--small-messages] (segments and message limits of ~1 KB, to exercise the split paths)
// [--wait=busy|yield|sleep|sleep-at-once|mixed] (how calls wait: ops/mpi_wait.h; sleep-at-once
// sleeps from the first poll on, mixed gives ranks different modes).
// Every rank runs the same tests in the same order; the exit code is the worst over all ranks and
// only rank 0 prints the full report (other ranks print their failures, prefixed with the rank).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>

#include "../ops/test_values.h"
#include "arcreduce/status.h"
#include "ops/mpi_check.h"
#include "ops/mpi_communicator.h"
#include "ops/mpi_cuda_support.h"
#include "ops/traffic_estimates.h"

namespace arcreduce {
namespace {

MpiCommunicatorOptions g_options;

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ static_cast<const unsigned char*>(data)[i]) * 1099511628211ull;
  return h;
}

// True when every rank of MPI_COMM_WORLD holds the same bytes.
bool identical_on_all_ranks(const void* data, size_t bytes) {
  uint64_t mine = fnv1a(data, bytes), low = 0, high = 0;
  MPI_Allreduce(&mine, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return low == high;
}

// Bytes sent and received by the whole job since `before` (this rank's counters then), summed
// over the ranks of MPI_COMM_WORLD.
std::array<uint64_t, 2> job_traffic_since(const Communicator& comm, const TrafficCounters& before) {
  const TrafficCounters after = comm.traffic();
  uint64_t delta[2] = {after.bytes_sent - before.bytes_sent,
                       after.bytes_received - before.bytes_received};
  std::array<uint64_t, 2> total{};
  MPI_Allreduce(delta, total.data(), 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

std::vector<char> pattern(size_t bytes, int seed) {
  std::vector<char> out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>((i * 131 + seed * 17 + 3) & 0xff);
  return out;
}

size_t block_size(int rank, size_t scale) {
  return rank % 3 == 1 ? 0 : (rank + 1) * scale + rank;
}

class MpiCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override { comm_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, g_options); }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  std::unique_ptr<MpiCommunicator> comm_;
};

TEST_F(MpiCommunicatorTest, RanksAndAlgorithm) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  EXPECT_EQ(rank(), world_rank);
  EXPECT_EQ(size(), world_size);
  const int per_host = g_options.ranks_per_host;
  if (g_options.hosts_apart) {
    EXPECT_EQ(comm_->local_size(), 1);
    EXPECT_EQ(comm_->local_rank(), 0);
    EXPECT_EQ(comm_->hosts(), world_size);
    EXPECT_FALSE(comm_->hierarchical());
  } else if (per_host > 0) {
    const int hosts = (world_size + per_host - 1) / per_host;
    EXPECT_EQ(comm_->local_rank(), world_rank % per_host);
    EXPECT_EQ(comm_->local_size(),
              std::min(per_host, world_size - world_rank / per_host * per_host));
    EXPECT_EQ(comm_->hosts(), hosts);
    EXPECT_EQ(comm_->hierarchical(),
              hosts > 1 && per_host > 1 && g_options.hierarchy != Hierarchy::kOff);
    EXPECT_EQ(comm_->sharded(), comm_->hierarchical() && world_size % per_host == 0 &&
                                    g_options.hierarchy != Hierarchy::kLeader);
  } else {
    EXPECT_EQ(comm_->local_size(), world_size);  // one host under ctest
    EXPECT_EQ(comm_->local_rank(), world_rank);
    EXPECT_FALSE(comm_->hierarchical());
  }
  const bool across_hosts = g_options.hosts_apart || comm_->hosts() > 1;
  if (g_options.algorithm == AllreduceAlgorithm::kAuto && across_hosts) {
    // Across hosts: the probe measured a link, every rank the same one, and the choice is the
    // model's for every size (between the hosts' first ranks where the hierarchy is on).
    const CommunicationUsage usage = comm_->communication_usage();
    if (world_size > 1) {
      EXPECT_GT(usage.link_latency_seconds, 0);
      EXPECT_GT(usage.link_seconds_per_byte, 0);
    }
    double mine[2] = {usage.link_latency_seconds, usage.link_seconds_per_byte}, low[2], high[2];
    MPI_Allreduce(mine, low, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, high, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(low[0], high[0]);
    EXPECT_EQ(low[1], high[1]);
    LinkModel link = comm_->options().link;
    for (size_t bytes = 1; bytes <= (size_t{1} << 28); bytes *= 4) {
      // kAuto sends by host what the ring would carry between hosts; kOn everything.
      const bool ring_between_hosts =
          bytes >= (comm_->hosts() == 2 ? kTwoRankRingThresholdBytes : kRingThresholdBytes);
      const bool by_host =
          comm_->hierarchical() && (g_options.hierarchy == Hierarchy::kOn || ring_between_hosts);
      EXPECT_EQ(comm_->hierarchical_for(bytes), by_host) << bytes;
      const int exchanging = by_host ? comm_->hosts() : world_size;
      // Sharded, each rank carries 1/S of the message between hosts.
      const size_t carried =
          by_host && comm_->sharded() ? (bytes + per_host - 1) / per_host : bytes;
      EXPECT_EQ(comm_->algorithm_for(bytes),
                choose_allreduce_algorithm(AllreduceAlgorithm::kAuto, carried, exchanging, 1,
                                           kRingThresholdBytes, link))
          << bytes;
    }
  } else if (g_options.algorithm == AllreduceAlgorithm::kAuto) {
    EXPECT_EQ(comm_->algorithm_for(size_t{1} << 30), AllreduceAlgorithm::kMpi);
  } else if (g_options.algorithm == AllreduceAlgorithm::kThresholds) {
    EXPECT_EQ(comm_->algorithm_for(1),
              resolve_allreduce_algorithm(AllreduceAlgorithm::kThresholds, 1, world_size,
                                          comm_->local_size(), kRingThresholdBytes));
    EXPECT_EQ(comm_->communication_usage().link_seconds_per_byte, 0);  // nothing measured
  } else {
    EXPECT_EQ(comm_->algorithm_for(1), g_options.algorithm);
  }
}

// Device buffers go to MPI only where the loaded library is CUDA-aware, and then only for what
// MPI_Allreduce sums itself; the ring and the fp16/bf16 user ops always get host memory.
TEST_F(MpiCommunicatorTest, DeviceMemoryOnlyWithCudaAwareMpiAndItsOwnSum) {
  const bool aware = mpi_cuda_support_compiled() == 1 && mpi_cuda_support_runtime() == 1;
  for (ScalarType type : testing::all_types()) {
    for (size_t count : {size_t{1}, size_t{1} << 22}) {
      const AllreduceAlgorithm algorithm = comm_->algorithm_for(count * scalar_size(type));
      const bool expect = aware && algorithm == AllreduceAlgorithm::kMpi &&
                          (type == ScalarType::kFloat32 || type == ScalarType::kFloat64);
      EXPECT_EQ(comm_->allreduce_accepts_device_memory(type, count), expect)
          << scalar_type_name(type) << " x " << count;
    }
  }
  const int runtime = mpi_cuda_support_runtime();
  EXPECT_TRUE(runtime == -1 || runtime == 0 || runtime == 1) << runtime;
}

TEST_F(MpiCommunicatorTest, AllreduceEveryTypeOpAndCountExactly) {
  for (ScalarType type : testing::all_types()) {
    for (CollectiveOp op : testing::all_ops()) {
      // Half-precision products round at every step (three halves' product needs more bits than
      // fp16 has), so only an in-order reduction matches the reference: the loopback and kernel
      // tests check them.
      const bool half = type == ScalarType::kFloat16 || type == ScalarType::kBFloat16;
      if (half && op == CollectiveOp::kProd) continue;
      // The inputs carry 6 significant bits: a float32 product of more than four of them
      // rounds too, and then only as an in-order reduction.
      if (type == ScalarType::kFloat32 && op == CollectiveOp::kProd && size() > 4) continue;
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100000}}) {
        // Exact inputs: float sums and products are exact, so any reduction order gives the
        // reference.
        std::vector<char> buf = testing::make_values(type, count, rank(), true);
        comm_->allreduce(buf.data(), count, type, op);
        const std::vector<char> expected = testing::naive_allreduce(type, op, count, size(), true);
        EXPECT_EQ(buf, expected) << scalar_type_name(type) << " " << collective_op_name(op)
                                 << " count " << count;
        EXPECT_TRUE(identical_on_all_ranks(buf.data(), buf.size()));
      }
    }
  }
}

// Messages the ring carries between hosts go by host under auto, 1 and leader: every type and
// op, at counts that do not divide among a host's ranks, exact and the same on every rank; the
// host stages' traffic balances (what one rank sends another receives).
TEST_F(MpiCommunicatorTest, AllreduceByHostEveryTypeAndOpExactly) {
  if (!comm_->hierarchical()) GTEST_SKIP() << "needs several ranks on a host of several hosts";
  const size_t ring = ring_threshold_for(comm_->hosts(), kRingThresholdBytes);
  for (ScalarType type : testing::all_types()) {
    for (CollectiveOp op : testing::all_ops()) {
      const bool half = type == ScalarType::kFloat16 || type == ScalarType::kBFloat16;
      if (half && op == CollectiveOp::kProd) continue;
      if (type == ScalarType::kFloat32 && op == CollectiveOp::kProd && size() > 4) continue;
      const size_t count = ring / scalar_size(type) + 3;
      ASSERT_TRUE(comm_->hierarchical_for(count * scalar_size(type)));
      const TrafficCounters before = comm_->traffic();
      std::vector<char> buf = testing::make_values(type, count, rank(), true);
      comm_->allreduce(buf.data(), count, type, op);
      EXPECT_EQ(buf, testing::naive_allreduce(type, op, count, size(), true))
          << scalar_type_name(type) << " " << collective_op_name(op) << " count " << count;
      EXPECT_TRUE(identical_on_all_ranks(buf.data(), buf.size()));
      const std::array<uint64_t, 2> total = job_traffic_since(*comm_, before);
      EXPECT_EQ(total[0], total[1]);
      // At least the host stages' share: every rank but the hosts' exchanging ones sends about
      // its whole message within the host.
      EXPECT_GE(total[0], static_cast<uint64_t>(size() - comm_->hosts()) * count / 2);
    }
  }
}

// Doubling and Rabenseifner reduce along the same tree, so the link model may choose either
// without changing a result: the same inexact inputs give the same bits by both.
TEST(MpiAlgorithmsTest, DoublingAndRabenseifnerGiveTheSameBits) {
  MpiCommunicatorOptions doubling_options = g_options, raben_options = g_options;
  doubling_options.algorithm = AllreduceAlgorithm::kDoubling;
  raben_options.algorithm = AllreduceAlgorithm::kRabenseifner;
  MpiCommunicator doubling(MPI_COMM_WORLD, doubling_options);
  MpiCommunicator raben(MPI_COMM_WORLD, raben_options);
  for (ScalarType type :
       {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kBFloat16}) {
    for (size_t count : {size_t{1}, size_t{3}, size_t{1001}, size_t{30011}}) {
      std::vector<char> a = testing::make_values(type, count, doubling.rank(), false, 5);
      std::vector<char> b = a;
      doubling.allreduce(a.data(), count, type, CollectiveOp::kSum);
      raben.allreduce(b.data(), count, type, CollectiveOp::kSum);
      EXPECT_EQ(a, b) << scalar_type_name(type) << " x " << count;
    }
  }
}

TEST_F(MpiCommunicatorTest, AllreduceInexactFloatsIsBitIdenticalAndClose) {
  for (ScalarType type : {ScalarType::kFloat32, ScalarType::kFloat16, ScalarType::kBFloat16}) {
    const size_t count = 30011;
    std::vector<char> buf = testing::make_values(type, count, rank(), false, 9);
    comm_->allreduce(buf.data(), count, type, CollectiveOp::kSum);
    EXPECT_TRUE(identical_on_all_ranks(buf.data(), buf.size())) << scalar_type_name(type);
    // Rounding bound as in the loopback test: (P-1) * u * sum |x|, inputs in [-8, 8).
    const double u = type == ScalarType::kFloat32   ? std::ldexp(1.0, -24)
                     : type == ScalarType::kFloat16 ? std::ldexp(1.0, -11)
                                                    : std::ldexp(1.0, -8);
    std::vector<std::vector<char>> inputs;
    for (int r = 0; r < size(); ++r)
      inputs.push_back(testing::make_values(type, count, r, false, 9));
    const size_t n = scalar_size(type);
    auto value = [&](const std::vector<char>& v, size_t i) -> double {
      if (type == ScalarType::kFloat32) return testing::load<float>(&v[i * n]);
      const uint16_t h = testing::load<uint16_t>(&v[i * n]);
      return type == ScalarType::kFloat16 ? fp16_to_float(h) : bf16_to_float(h);
    };
    for (size_t i = 0; i < count; ++i) {
      double exact = 0, magnitude = 0;
      for (const auto& in : inputs) {
        exact += value(in, i);
        magnitude += std::fabs(value(in, i));
      }
      ASSERT_LE(std::fabs(value(buf, i) - exact), (size() - 1) * u * magnitude + 1e-300)
          << scalar_type_name(type) << " element " << i;
    }
  }
}

TEST_F(MpiCommunicatorTest, AllgatherAndAllgatherv) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{100000}}) {
    const std::vector<char> mine = pattern(bytes, rank());
    std::vector<char> out(bytes * size(), 'x');
    comm_->allgather(mine.data(), bytes, out.data());
    for (int r = 0; r < size(); ++r) {
      EXPECT_TRUE(std::equal(out.begin() + r * bytes, out.begin() + (r + 1) * bytes,
                             pattern(bytes, r).begin()));
    }
    std::vector<size_t> sizes(size());
    for (int r = 0; r < size(); ++r) sizes[r] = block_size(r, bytes);
    const std::vector<char> block = pattern(sizes[rank()], rank());
    std::vector<char> all(std::accumulate(sizes.begin(), sizes.end(), size_t{0}));
    comm_->allgatherv(block.data(), all.data(), sizes);
    std::vector<char> expected;
    for (int r = 0; r < size(); ++r) {
      const std::vector<char> b = pattern(sizes[r], r);
      expected.insert(expected.end(), b.begin(), b.end());
    }
    EXPECT_EQ(all, expected) << bytes;
  }
}

// By host (--ranks-per-host with the hierarchy on), an All-Gather's blocks cross each host's link
// once: the host's other ranks send theirs to its first rank, the first ranks All-Gather their
// hosts' blocks, and the whole result goes back as a broadcast within the host. Flat otherwise.
TEST_F(MpiCommunicatorTest, AllgatherByHostCountsItsStages) {
  std::vector<size_t> sizes(size());
  for (int r = 0; r < size(); ++r) sizes[r] = block_size(r, 1000);
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  const std::vector<char> block = pattern(sizes[rank()], rank());
  std::vector<char> all(total);
  const TrafficCounters before = comm_->traffic();
  comm_->allgatherv(block.data(), all.data(), sizes);
  const TrafficCounters after = comm_->traffic();
  TrafficCounters want = allgatherv_traffic(sizes, rank());
  const int per_host = g_options.ranks_per_host;
  if (comm_->hierarchical() && total <= comm_->options().max_message_bytes) {
    const int host = rank() / per_host, local = rank() % per_host;
    const int local_size = std::min(per_host, size() - host * per_host);
    std::vector<size_t> host_bytes(comm_->hosts(), 0);
    for (int r = 0; r < size(); ++r) host_bytes[r / per_host] += sizes[r];
    want = broadcast_traffic(total, local_size, local, 0);
    if (local == 0) {
      add_traffic(&want, allgatherv_traffic(host_bytes, host));
      want.bytes_received += host_bytes[host] - sizes[rank()];
    } else {
      want.bytes_sent += sizes[rank()];
    }
  }
  EXPECT_EQ(after.bytes_sent - before.bytes_sent, want.bytes_sent);
  EXPECT_EQ(after.bytes_received - before.bytes_received, want.bytes_received);
  std::vector<char> expected;
  for (int r = 0; r < size(); ++r) {
    const std::vector<char> b = pattern(sizes[r], r);
    expected.insert(expected.end(), b.begin(), b.end());
  }
  EXPECT_EQ(all, expected);
}

TEST_F(MpiCommunicatorTest, GathervAndBroadcastFromEveryRoot) {
  for (int root = 0; root < size(); ++root) {
    const std::vector<char> bytes = pattern(block_size(rank(), 3000), rank());
    std::vector<std::string> blocks;
    comm_->gatherv(std::string(bytes.begin(), bytes.end()), rank() == root ? &blocks : nullptr,
                   root);
    if (rank() == root) {
      ASSERT_EQ(blocks.size(), static_cast<size_t>(size()));
      for (int r = 0; r < size(); ++r) {
        const std::vector<char> b = pattern(block_size(r, 3000), r);
        EXPECT_EQ(blocks[r], std::string(b.begin(), b.end()));
      }
    }
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{100000}}) {
      std::vector<char> buf = rank() == root ? pattern(n, root) : std::vector<char>(n);
      comm_->broadcast(buf.data(), n, root);
      EXPECT_EQ(buf, pattern(n, root));
      std::string text = rank() == root ? std::string(n, static_cast<char>('a' + root)) : "stale";
      comm_->broadcast(&text, root);
      EXPECT_EQ(text, std::string(n, static_cast<char>('a' + root)));
    }
  }
}

TEST_F(MpiCommunicatorTest, Alltoallv) {
  const auto amount = [](int s, int d) { return static_cast<size_t>((s + 2 * d) % 5 * 1111); };
  std::vector<size_t> send_bytes(size()), recv_bytes(size());
  std::vector<char> send;
  for (int d = 0; d < size(); ++d) {
    send_bytes[d] = amount(rank(), d);
    recv_bytes[d] = amount(d, rank());
    send.insert(send.end(), send_bytes[d], static_cast<char>(rank() * 16 + d));
  }
  std::vector<char> recv(std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0}));
  comm_->alltoallv(send.data(), send_bytes, recv.data(), recv_bytes);
  size_t offset = 0;
  for (int s = 0; s < size(); ++s) {
    for (size_t i = 0; i < recv_bytes[s]; ++i) {
      ASSERT_EQ(recv[offset + i], static_cast<char>(s * 16 + rank())) << "from " << s;
    }
    offset += recv_bytes[s];
  }
}

// Every collective other than allreduce() is counted by kind with the payload its kind defines
// (CommunicationUsage), so that a step's cost can be modelled from the counts.
TEST_F(MpiCommunicatorTest, CountsEveryOtherCollectiveByKind) {
  const CommunicationUsage before = comm_->communication_usage();
  const int right = (rank() + 1) % size(), left = (rank() - 1 + size()) % size();
  std::vector<char> block(7, 'a'), gathered(7 * size());
  comm_->allgather(block.data(), block.size(), gathered.data());
  std::vector<size_t> sizes(size());
  for (int r = 0; r < size(); ++r) sizes[r] = static_cast<size_t>(r + 1);
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  std::vector<char> mine(sizes[rank()], 'b'), all(total);
  comm_->allgatherv(mine.data(), all.data(), sizes);
  std::vector<size_t> to(size(), 3);  // 3 bytes to every rank, itself included
  std::vector<char> out(3 * size(), 'c'), in(3 * size());
  comm_->alltoallv(out.data(), to, in.data(), to);
  std::vector<char> message(11, 'd');
  comm_->broadcast(message.data(), message.size(), 0);
  std::vector<std::string> blocks;
  comm_->gatherv(std::string(sizes[rank()], 'e'), rank() == 0 ? &blocks : nullptr, 0);
  std::vector<char> ring_in(5);
  comm_->sendrecv(message.data(), 5, right, ring_in.data(), 5, left, 9);
  P2pRequest receive = comm_->irecv(ring_in.data(), 4, left, 10);
  P2pRequest send = comm_->isend(message.data(), 4, right, 10);
  comm_->wait(&send);
  comm_->wait(&receive);
  const CommunicationUsage after = comm_->communication_usage();
  const auto grew = [&](const std::map<std::string, uint64_t>& a,
                        const std::map<std::string, uint64_t>& b, const std::string& kind) {
    const auto was = b.find(kind);
    const auto is = a.find(kind);
    return (is == a.end() ? 0 : is->second) - (was == b.end() ? 0 : was->second);
  };
  const uint64_t p = static_cast<uint64_t>(size());
  const std::map<std::string, std::pair<uint64_t, uint64_t>> expected = {
      {"allgather", {1, 7}},  {"allgatherv", {1, total}}, {"alltoallv", {1, 3 * (p - 1)}},
      {"broadcast", {1, 11}}, {"gatherv", {1, total}},    {"point_to_point", {2, 9}}};
  for (const auto& [kind, want] : expected) {
    EXPECT_EQ(grew(after.collective_calls, before.collective_calls, kind), want.first) << kind;
    EXPECT_EQ(grew(after.collective_bytes, before.collective_bytes, kind), want.second) << kind;
  }
  EXPECT_EQ(after.collective_calls.size(), expected.size());
}

TEST_F(MpiCommunicatorTest, PointToPointAndTraffic) {
  const int right = (rank() + 1) % size(), left = (rank() - 1 + size()) % size();
  const TrafficCounters before = comm_->traffic();
  for (size_t n : {size_t{0}, size_t{7}, size_t{100000}}) {
    const std::vector<char> out = pattern(n, rank());
    std::vector<char> in(n);
    comm_->sendrecv(out.data(), n, right, in.data(), n, left, 3);
    EXPECT_EQ(in, pattern(n, left));
    if (size() > 1) {
      // Ordered exchange: even ranks send first (odd world sizes pair the last rank with 0).
      if (rank() % 2 == 0) {
        comm_->send(out.data(), n, right, 4);
        comm_->recv(in.data(), n, left, 4);
      } else {
        comm_->recv(in.data(), n, left, 4);
        comm_->send(out.data(), n, right, 4);
      }
      EXPECT_EQ(in, pattern(n, left));
    }
  }
  comm_->barrier();
  std::vector<float> buf(5003, 1.0f);
  comm_->allreduce(buf.data(), buf.size(), ScalarType::kFloat32, CollectiveOp::kSum);
  EXPECT_EQ(buf[5002], static_cast<float>(size()));
  const std::array<uint64_t, 2> total = job_traffic_since(*comm_, before);
  EXPECT_EQ(total[0], total[1]);
  const uint64_t p2p = (size() > 1 ? 2 : 1) * uint64_t{100007} * size();
  // The ring (and MPI's estimate) forwards 2(P-1) chunks per rank; recursive doubling sends the
  // whole buffer per round and, off a power of two, twice more per folded pair. A doubling
  // allreduce over the message limit takes the ring.
  const uint64_t bytes = 5003 * 4;
  const AllreduceAlgorithm algorithm = comm_->algorithm_for(bytes);
  // With the hierarchy, `exchanging` = one rank per host runs the algorithm; each other rank
  // sends its buffer to its host's first rank and receives the result back. Sharded, the hosts'
  // S exchanges of 1/S add up to one of the whole, and the reduce-scatter and All-Gather within
  // a host move what the leader's reduce and broadcast do.
  const int exchanging = comm_->hierarchical_for(bytes) ? comm_->hosts() : size();
  const bool whole_messages = bytes <= comm_->options().max_message_bytes && exchanging > 1;
  uint64_t allreduce = exchanging > 1 ? 2ull * (exchanging - 1) * bytes : 0;
  int p2 = 1, rounds = 0;
  while (p2 * 2 <= exchanging) {
    p2 *= 2;
    ++rounds;
  }
  const uint64_t folds = 2ull * (exchanging - p2) * bytes;
  if (algorithm == AllreduceAlgorithm::kDoubling && whole_messages) {
    allreduce = uint64_t{static_cast<uint64_t>(p2)} * rounds * bytes + folds;
  }
  // Rabenseifner: the p2 exchanging ranks send (p2 - 1) messages' worth in each half.
  if (algorithm == AllreduceAlgorithm::kRabenseifner && whole_messages) {
    allreduce = 2ull * (p2 - 1) * bytes + folds;
  }
  allreduce += 2ull * static_cast<uint64_t>(size() - exchanging) * bytes;
  // Stats name the algorithm that ran: doubling and Rabenseifner hand messages above the
  // limit to the ring.
  const bool by_whole_messages =
      algorithm == AllreduceAlgorithm::kDoubling || algorithm == AllreduceAlgorithm::kRabenseifner;
  const AllreduceAlgorithm ran =
      by_whole_messages && !whole_messages ? AllreduceAlgorithm::kRing : algorithm;
  if (size() > 1) {
    EXPECT_EQ(comm_->communication_usage().calls.count(allreduce_algorithm_name(ran)), 1u)
        << allreduce_algorithm_name(ran);
  }
  EXPECT_EQ(total[0], p2p + allreduce);
}

// isend/irecv to and from every rank, all posted before any wait, completed in reverse order;
// blocks larger than the split limit under --small-messages. Traffic counts exact bytes.
TEST_F(MpiCommunicatorTest, NonBlockingPointToPoint) {
  const TrafficCounters before = comm_->traffic();
  std::vector<std::vector<char>> out(size()), in(size());
  std::vector<P2pRequest> requests;
  uint64_t sent = 0, received = 0;
  for (int q = 0; q < size(); ++q) {
    if (q == rank()) continue;
    out[q] = pattern(block_size(rank(), 1500), rank() * 100 + q);
    in[q].resize(block_size(q, 1500));
    requests.push_back(comm_->irecv(in[q].data(), in[q].size(), q, 6));
    requests.push_back(comm_->isend(out[q].data(), out[q].size(), q, 6));
    sent += out[q].size();
    received += in[q].size();
  }
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) comm_->wait(&*it);
  for (int q = 0; q < size(); ++q) {
    if (q != rank()) {
      EXPECT_EQ(in[q], pattern(block_size(q, 1500), q * 100 + rank()));
    }
  }
  if (size() > 1) {
    // A short message is an error, not stale bytes.
    const int right = (rank() + 1) % size(), left = (rank() - 1 + size()) % size();
    std::vector<char> small = pattern(3, 1), big(5);
    P2pRequest r = comm_->irecv(big.data(), big.size(), left, 7);
    P2pRequest s = comm_->isend(small.data(), small.size(), right, 7);
    EXPECT_THROW(comm_->wait(&r), Error);
    comm_->wait(&s);
    sent += 3;
    received += 0;
  }
  P2pRequest none;
  comm_->wait(&none);
  const TrafficCounters after = comm_->traffic();
  EXPECT_EQ(after.bytes_sent - before.bytes_sent, sent);
  EXPECT_EQ(after.bytes_received - before.bytes_received, received);
  comm_->barrier();
}

// Every call counts one completed call, and calls on one rank do not depend on another's wait
// mode. A late peer (rank 0 enters 30 ms after the others) exercises the waits' back-off.
TEST_F(MpiCommunicatorTest, CountsCallsAndWaitsForLatePeers) {
  const uint64_t before = comm_->traffic().calls;
  if (rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i + rank());
  comm_->allreduce(values.data(), values.size(), ScalarType::kFloat32, CollectiveOp::kSum);
  for (size_t i = 0; i < values.size(); ++i) {
    const double expected = size() * static_cast<double>(i) + size() * (size() - 1) / 2.0;
    ASSERT_EQ(values[i], static_cast<float>(expected)) << "element " << i;
  }
  if (rank() == size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  comm_->barrier();
  uint64_t token = rank() == 0 ? 77 : 0;
  comm_->broadcast(&token, sizeof(token), 0);
  EXPECT_EQ(token, 77u);
  const uint64_t calls = comm_->traffic().calls - before;
  // A one-rank allreduce returns without communicating and counts nothing.
  EXPECT_EQ(calls, size() > 1 ? 3u : 2u);
}

TEST(MpiWait, ParsesModesAndNamesBadOnes) {
  for (const std::string& name : wait_mode_names()) {
    EXPECT_EQ(wait_mode_name(parse_wait_mode(name)), name);
  }
  try {
    parse_wait_mode("spin");
    FAIL() << "accepted wait mode 'spin'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'spin'"), std::string::npos) << e.what();
  }
}

// A receive that completes only after several sleeps, under each mode, on this rank alone.
// Every mode, and point_to_point()'s single test per wake-up (point-to-point requests advance
// on every test).
TEST(MpiWait, EveryModeCompletesASelfMessageSentLate) {
  for (WaitMode mode : {WaitMode::kBusy, WaitMode::kYield, WaitMode::kSleep})
    for (bool one_test : {false, true}) {
      WaitPolicy policy;
      policy.mode = mode;
      policy.spin = std::chrono::microseconds(0);
      if (one_test) policy = point_to_point(policy);
      ASSERT_EQ(policy.poll_burst, one_test ? 1 : 16);
      int received = 0, sent = 41;
      MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      ASSERT_EQ(MPI_Irecv(&received, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_SELF, &requests[0]),
                MPI_SUCCESS);
      ASSERT_EQ(MPI_Irecv(&received, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &requests[1]), MPI_SUCCESS);
      std::thread sender([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        MPI_Send(&sent, 1, MPI_INT, 0, 5, MPI_COMM_SELF);
      });
      MPI_Status statuses[2];
      wait_requests(requests, 2, statuses, policy);
      sender.join();
      EXPECT_EQ(received, 41) << wait_mode_name(mode);
      EXPECT_EQ(statuses[1].MPI_TAG, 5) << wait_mode_name(mode);
      EXPECT_EQ(requests[1], MPI_REQUEST_NULL);
      wait_requests(requests, 2, MPI_STATUSES_IGNORE, policy);  // all null: returns at once
    }
}

// Waits that usually outlast the spin stop polling for it, per message size; quick ones bring
// the whole spin back.
TEST(MpiWait, HistoryShortensTheSpinWhereWaitsAreLong) {
  using std::chrono::microseconds;
  WaitHistory history;
  const microseconds spin(1000);
  EXPECT_EQ(history.spin_for(16, spin), spin) << "a fresh class polls the whole spin";
  for (int i = 0; i < 8; ++i) history.record(16, spin, std::chrono::milliseconds(5));
  EXPECT_LT(history.quick_fraction(16), 0.5);
  EXPECT_EQ(history.spin_for(16, spin), WaitHistory::kShortSpin);
  EXPECT_EQ(history.spin_for(16, microseconds(5)), microseconds(5)) << "never above the spin";
  // Another size class is unaffected: 16 bytes and 1 MiB are far apart.
  EXPECT_EQ(history.spin_for(1 << 20, spin), spin);
  EXPECT_DOUBLE_EQ(history.quick_fraction(1 << 20), 1.0);
  for (int i = 0; i < 16; ++i) history.record(16, spin, microseconds(100));
  EXPECT_GE(history.quick_fraction(16), 0.5);
  EXPECT_EQ(history.spin_for(16, spin), spin);

  // wait_requests records into the policy's history (kSleep only).
  WaitPolicy policy;
  policy.history = std::make_shared<WaitHistory>();
  policy.spin = microseconds(0);
  for (int i = 0; i < 8; ++i) {
    int received = 0, sent = 3;
    MPI_Request request = MPI_REQUEST_NULL;
    ASSERT_EQ(MPI_Irecv(&received, 1, MPI_INT, 0, 12, MPI_COMM_SELF, &request), MPI_SUCCESS);
    std::thread sender([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      MPI_Send(&sent, 1, MPI_INT, 0, 12, MPI_COMM_SELF);
    });
    wait_request(&request, MPI_STATUS_IGNORE, policy, sizeof(int));
    sender.join();
    EXPECT_EQ(received, 3);
  }
  EXPECT_LT(policy.history->quick_fraction(sizeof(int)), 0.5);
}

// A wait with a timeout throws CommunicationTimeout (kStalled) when none of its requests
// completes for that long, in every mode, and leaves the request posted; a request that
// completes in time is not affected.
TEST(MpiWait, EveryModeTimesOutWithoutProgress) {
  for (WaitMode mode : {WaitMode::kBusy, WaitMode::kYield, WaitMode::kSleep}) {
    WaitPolicy policy;
    policy.mode = mode;
    policy.timeout = std::chrono::milliseconds(300);
    int received = 0, sent = 7;
    MPI_Request request = MPI_REQUEST_NULL;
    ASSERT_EQ(MPI_Irecv(&received, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &request), MPI_SUCCESS);
    const auto start = std::chrono::steady_clock::now();
    try {
      wait_request(&request, MPI_STATUS_IGNORE, policy);
      ADD_FAILURE() << wait_mode_name(mode) << ": no timeout";
    } catch (const CommunicationTimeout& e) {
      EXPECT_EQ(e.code(), StatusCode::kStalled);
      const std::string message = e.what();
      EXPECT_NE(message.find("no progress for 0.3 s"), std::string::npos) << message;
      EXPECT_NE(message.find("1 of 1 MPI requests"), std::string::npos) << message;
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, policy.timeout) << wait_mode_name(mode);
    ASSERT_NE(request, MPI_REQUEST_NULL) << "the timed-out request must stay posted";
    // The request is still usable: a late message completes it.
    ASSERT_EQ(MPI_Send(&sent, 1, MPI_INT, 0, 9, MPI_COMM_SELF), MPI_SUCCESS);
    wait_request(&request, MPI_STATUS_IGNORE, policy);
    EXPECT_EQ(received, 7) << wait_mode_name(mode);

    // Two requests completing 100 ms apart under real MPI progress: no timeout. That the
    // timeout counts from the last completion, not the start, is run_wait_loop's rule and is
    // tested on a scripted clock (WaitLoop.TimeoutCountsFromTheLastCompletion): here the timeout
    // is 3 s, since on the loaded 2-core suite the sender thread was kept off the cores for over
    // 200 ms (with 0.3 s this failed there).
    WaitPolicy progressing = policy;
    progressing.timeout = std::chrono::milliseconds(3000);
    MPI_Request two[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int a = 0, b = 0;
    ASSERT_EQ(MPI_Irecv(&a, 1, MPI_INT, 0, 10, MPI_COMM_SELF, &two[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Irecv(&b, 1, MPI_INT, 0, 11, MPI_COMM_SELF, &two[1]), MPI_SUCCESS);
    std::thread sender([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      MPI_Send(&sent, 1, MPI_INT, 0, 10, MPI_COMM_SELF);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      MPI_Send(&sent, 1, MPI_INT, 0, 11, MPI_COMM_SELF);
    });
    EXPECT_NO_THROW(wait_requests(two, 2, MPI_STATUSES_IGNORE, progressing))
        << wait_mode_name(mode);
    sender.join();
    EXPECT_EQ(a + b, 14) << wait_mode_name(mode);
  }
}

// Every rank answers the liveness check, so nobody is named silent.
TEST_F(MpiCommunicatorTest, LivenessCheckFindsNoSilentRankWhenAllTakePart) {
  std::vector<int> silent{42};
  ASSERT_TRUE(comm_->find_silent_ranks(std::chrono::milliseconds(5000), &silent));
  EXPECT_TRUE(silent.empty()) << "rank " << silent.front() << " named silent";
  comm_->barrier();
}

TEST_F(MpiCommunicatorTest, ErrorsAreThrownNotFatal) {
  char buf[8] = {};
  EXPECT_THROW(comm_->send(buf, 1, size(), 0), Error);
  EXPECT_THROW(comm_->recv(buf, 1, 0, -2), Error);
  EXPECT_THROW(comm_->broadcast(buf, 1, size()), Error);
  EXPECT_THROW(comm_->allgatherv(buf, buf, std::vector<size_t>(size() + 1)), Error);
  // ARC_MPI_CHECK turns a failing call into Error(kInternal) with call text, place and MPI text.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  try {
    int r = 0;
    ARC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_NULL, &r));
    ADD_FAILURE() << "MPI error not thrown";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), StatusCode::kInternal);
    EXPECT_NE(message.find("MPI_Comm_rank(MPI_COMM_NULL, &r) failed at "), std::string::npos)
        << message;
    EXPECT_NE(message.find("communicator_mpi_test.cc:"), std::string::npos) << message;
    EXPECT_NE(message.find("MPI_ERR_COMM"), std::string::npos) << message;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  if (size() < 2 || rank() > 1) return;
  // A message shorter than the receive is legal MPI; we report it instead of leaving stale bytes.
  if (rank() == 0) {
    comm_->send(buf, 4, 1, 12);
  } else {
    try {
      comm_->recv(buf, 8, 0, 12);
      ADD_FAILURE() << "short message not reported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected 8"), std::string::npos) << e.what();
    }
  }
}

// Prints only failed assertions, prefixed with the rank (used on ranks other than 0).
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace arcreduce

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int bad_usage = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--algorithm=", 0) == 0) {
      try {
        arcreduce::g_options.algorithm = arcreduce::parse_allreduce_algorithm(arg.substr(12));
      } catch (const arcreduce::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        bad_usage = 1;
      }
    } else if (arg.rfind("--wait=", 0) == 0) {
      const std::string mode = arg.substr(7);
      arcreduce::WaitPolicy& wait = arcreduce::g_options.wait;
      try {
        if (mode == "mixed") {
          wait.mode = static_cast<arcreduce::WaitMode>(rank % 3);
        } else if (mode == "sleep-at-once") {
          wait.mode = arcreduce::WaitMode::kSleep;
          wait.spin = std::chrono::microseconds(0);
          wait.max_sleep = std::chrono::microseconds(2000);
        } else {
          wait.mode = arcreduce::parse_wait_mode(mode);
        }
      } catch (const arcreduce::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        bad_usage = 1;
      }
    } else if (arg == "--hosts-apart") {
      arcreduce::g_options.hosts_apart = true;
    } else if (arg.rfind("--ranks-per-host=", 0) == 0) {
      arcreduce::g_options.ranks_per_host = std::atoi(arg.substr(17).c_str());
      bad_usage |= arcreduce::g_options.ranks_per_host < 1;
    } else if (arg.rfind("--hierarchy=", 0) == 0) {
      try {
        arcreduce::g_options.hierarchy = arcreduce::parse_hierarchy(arg.substr(12));
      } catch (const arcreduce::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        bad_usage = 1;
      }
    } else if (arg == "--small-messages") {
      arcreduce::g_options.ring_segment_bytes = 1000;
      arcreduce::g_options.max_message_bytes = 1000;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      bad_usage = 1;
    }
  }
  int rc = bad_usage;
  if (!bad_usage) {
    if (rank != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new arcreduce::FailurePrinter(rank));
    }
    rc = RUN_ALL_TESTS();
  }
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && worst != rc) std::fprintf(stderr, "FAILED on another rank (see [rank N])\n");
  MPI_Finalize();
  return worst;
}
