// MpiCommunicator's stages by host (ARCREDUCE_HIERARCHICAL;
// docs/design/communicators-several-ranks-per-host.md): an All-Reduce summed within each host first
// (exchanged across hosts by the host's first rank, or sharded over its ranks), and an All-Gather
// whose blocks cross each host's link once.
#include "ops/mpi_communicator.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/mpi_check.h"
#include "ops/mpi_wait.h"
#include "ops/traffic_estimates.h"

namespace arcreduce {

// The host's ranks first wait for each other by the wait policy (sleeping by default: a rank may
// wait for a slower one, or for its first rank's exchange across hosts).
void MpiCommunicator::meet_host() {
  MPI_Request request = MPI_REQUEST_NULL;
  ARC_MPI_CHECK(MPI_Ibarrier(node_comm_, &request));
  wait_request(&request, MPI_STATUS_IGNORE, options_.wait);
}

// Once all are there, a host stage moves its data polling with yields: Open MPI advances a
// non-blocking collective only when tested, shared memory has no socket to take the bytes
// meanwhile, and the stage lasts milliseconds. Polling through the whole wait would take the
// host's CPU from the rank that has work to do.
WaitPolicy MpiCommunicator::moving_wait() const {
  WaitPolicy local = options_.wait;
  if (local.mode == WaitMode::kSleep) local.mode = WaitMode::kYield;
  return local;
}

void MpiCommunicator::reduce_to_first(void* buf, size_t count, ScalarType type, CollectiveOp op,
                                      TrafficCounters* traffic) {
  if (local_size_ < 2) return;
  const size_t element = scalar_size(type);
  const MpiReduction reduction = reduce_ops_.lookup(type, op);
  const size_t step = std::max<size_t>(1, options_.max_message_bytes / element);
  char* data = static_cast<char*>(buf);
  const WaitPolicy local = moving_wait();
  meet_host();
  for (size_t done = 0; done < count; done += step) {
    const int n = static_cast<int>(std::min(step, count - done));
    char* piece = data + done * element;
    MPI_Request request = MPI_REQUEST_NULL;
    ARC_MPI_CHECK(MPI_Ireduce(local_rank_ == 0 ? MPI_IN_PLACE : piece, piece, n, reduction.datatype,
                              reduction.op, 0, node_comm_, &request));
    wait_request(&request, MPI_STATUS_IGNORE, local, static_cast<size_t>(n) * element);
  }
  add_traffic(traffic, reduce_to_first_traffic(count * element, local_size_, local_rank_));
}

std::vector<int> MpiCommunicator::exchange_hosts() const {
  return hierarchical_ ? host_of_ : std::vector<int>();
}

void MpiCommunicator::reduce_within_host(float* buf, size_t count) {
  if (!hierarchical_) Communicator::reduce_within_host(buf, count);
  require_buffer(buf, count * sizeof(float), "reduce_within_host");
  TrafficCounters traffic;
  reduce_to_first(buf, count, ScalarType::kFloat32, CollectiveOp::kSum, &traffic);
  record(traffic);
}

// Every rank ends with its host's first rank's result, which the first ranks computed together,
// so replicas stay bit-identical; the sums within a host run in MPI's order, the same each call.
void MpiCommunicator::hierarchical_allreduce(AllreduceAlgorithm algorithm, void* buf, size_t count,
                                             ScalarType type, CollectiveOp op) {
  const size_t bytes = count * scalar_size(type);
  char* data = static_cast<char*>(buf);
  TrafficCounters traffic;
  reduce_to_first(buf, count, type, op, &traffic);
  if (leader_comm_ != MPI_COMM_NULL) {
    add_traffic(&traffic, run_allreduce(algorithm, leader_comm_, leader_ring_comm_,
                                        leader_segment_bytes_, buf, count, type, op));
  }
  if (local_size_ > 1) {
    meet_host();
    for (size_t done = 0; done < bytes; done += options_.max_message_bytes) {
      const int n = static_cast<int>(std::min(options_.max_message_bytes, bytes - done));
      MPI_Request request = MPI_REQUEST_NULL;
      ARC_MPI_CHECK(MPI_Ibcast(data + done, n, MPI_BYTE, 0, node_comm_, &request));
      wait_request(&request, MPI_STATUS_IGNORE, moving_wait(), static_cast<size_t>(n));
    }
    add_traffic(&traffic, broadcast_traffic(bytes, local_size_, local_rank_, 0));
  }
  record(traffic);
}

// Every rank ends with the same bytes: shard l is computed by local rank l of every host together
// (the same algorithm over the same shard on each), and the hosts' ranks All-Gather the shards.
// The message goes in pieces, pipelined: piece i's exchange between hosts runs while piece i+1 is
// reduce-scattered and piece i-1 All-Gathered within the host (MPI advances the host's
// non-blocking collectives whenever the exchange tests its own requests). Every rank posts the
// host's collectives in the same order: scatter 0, then per piece i scatter i+1 and gather i.
void MpiCommunicator::sharded_allreduce(void* buf, size_t count, ScalarType type, CollectiveOp op) {
  const size_t element = scalar_size(type);
  const MpiReduction reduction = reduce_ops_.lookup(type, op);
  const size_t step =
      std::max<size_t>(1, std::min(options_.max_message_bytes, kHostPieceBytes) / element);
  const size_t pieces = (count + step - 1) / step;
  const int ranks = local_size_;
  char* data = static_cast<char*>(buf);
  // Per piece: element counts (the scatter) and byte counts and offsets (the gather), which MPI
  // reads until the non-blocking call completes.
  std::vector<std::vector<int>> counts(pieces, std::vector<int>(ranks));
  std::vector<std::vector<int>> byte_counts = counts, byte_displs = counts;
  for (size_t i = 0; i < pieces; ++i) {
    const size_t n = std::min(step, count - i * step);
    for (int l = 0, offset = 0; l < ranks; ++l) {
      counts[i][l] = static_cast<int>(n / ranks + (static_cast<size_t>(l) < n % ranks ? 1 : 0));
      byte_counts[i][l] = counts[i][l] * static_cast<int>(element);
      byte_displs[i][l] = offset;
      offset += byte_counts[i][l];
    }
  }
  for (std::vector<char>& shard : shards_)
    shard.resize(std::max<size_t>(1, counts[0][0] * element));
  TrafficCounters traffic;
  const WaitPolicy local = moving_wait();
  MPI_Request scatter = MPI_REQUEST_NULL;
  std::vector<MPI_Request> gathers(pieces, MPI_REQUEST_NULL);
  auto post_scatter = [&](size_t i) {
    ARC_MPI_CHECK(MPI_Ireduce_scatter(data + i * step * element, shards_[i % 2].data(),
                                      counts[i].data(), reduction.datatype, reduction.op,
                                      node_comm_, &scatter));
  };
  meet_host();
  post_scatter(0);
  for (size_t i = 0; i < pieces; ++i) {
    char* piece = data + i * step * element;
    const size_t piece_bytes = std::min(step, count - i * step) * element;
    const size_t mine = static_cast<size_t>(counts[i][local_rank_]);
    const size_t mine_bytes = mine * element;
    wait_request(&scatter, MPI_STATUS_IGNORE, local, piece_bytes);
    traffic.bytes_sent += piece_bytes - mine_bytes;
    traffic.bytes_received += mine_bytes * static_cast<size_t>(ranks - 1);
    if (i + 1 < pieces) post_scatter(i + 1);  // into the other buffer, copied out last round
    if (mine > 0) {
      char* shard = shards_[i % 2].data();
      add_traffic(&traffic,
                  run_allreduce(algorithm_for(mine_bytes, true), shard_comm_, shard_ring_comm_,
                                leader_segment_bytes_, shard, mine, type, op));
      std::memcpy(piece + byte_displs[i][local_rank_], shard, mine_bytes);
    }
    ARC_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, piece, byte_counts[i].data(),
                                  byte_displs[i].data(), MPI_BYTE, node_comm_, &gathers[i]));
    traffic.bytes_sent += mine_bytes * static_cast<size_t>(ranks - 1);
    traffic.bytes_received += piece_bytes - mine_bytes;
  }
  for (size_t i = 0; i < pieces; ++i) {
    wait_request(&gathers[i], MPI_STATUS_IGNORE, local, std::min(step, count - i * step) * element);
  }
  record(traffic);
}

// The blocks cross each host's link once: the host's ranks gather theirs at its first rank, the
// first ranks All-Gather their hosts' blocks, and each hands the whole result back within its
// host. The result is the flat All-Gather's, byte for byte (blocks in rank order).
void MpiCommunicator::allgatherv_by_host(const void* send, void* recv,
                                         const std::vector<size_t>& recv_bytes, size_t total) {
  // Host-major layout: host 0's ranks' blocks in rank order, then host 1's, ...
  std::vector<size_t> host_bytes(hosts_, 0), host_offset(hosts_ + 1, 0);
  for (int r = 0; r < size_; ++r) host_bytes[host_of_[r]] += recv_bytes[r];
  for (int h = 0; h < hosts_; ++h) host_offset[h + 1] = host_offset[h] + host_bytes[h];
  const int host = host_of_[rank_];
  std::vector<int> counts, displs;  // this host's ranks within its host's part
  for (int r = 0, offset = 0; r < size_; ++r) {
    if (host_of_[r] != host) continue;
    counts.push_back(static_cast<int>(recv_bytes[r]));
    displs.push_back(offset);
    offset += static_cast<int>(recv_bytes[r]);
  }
  const bool first = local_rank_ == 0;
  std::vector<char> by_host(first ? total : 0);
  meet_host();
  MPI_Request request = MPI_REQUEST_NULL;
  ARC_MPI_CHECK(MPI_Igatherv(send, static_cast<int>(recv_bytes[rank_]), MPI_BYTE,
                             first ? by_host.data() + host_offset[host] : nullptr, counts.data(),
                             displs.data(), MPI_BYTE, 0, node_comm_, &request));
  wait_request(&request, MPI_STATUS_IGNORE, moving_wait(), host_bytes[host]);
  if (first) {
    std::vector<int> host_counts(hosts_), host_displs(hosts_);
    for (int h = 0; h < hosts_; ++h) {
      host_counts[h] = static_cast<int>(host_bytes[h]);
      host_displs[h] = static_cast<int>(host_offset[h]);
    }
    ARC_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, by_host.data(), host_counts.data(),
                                  host_displs.data(), MPI_BYTE, leader_comm_, &request));
    wait_request(&request, MPI_STATUS_IGNORE, options_.wait, total);
    // Back to rank order.
    std::vector<size_t> next(host_offset.begin(), host_offset.end() - 1);
    char* out = static_cast<char*>(recv);
    for (int r = 0, offset = 0; r < size_; ++r) {
      const size_t n = recv_bytes[r];
      if (n > 0) std::memcpy(out + offset, by_host.data() + next[host_of_[r]], n);
      next[host_of_[r]] += n;
      offset += static_cast<int>(n);
    }
  }
  meet_host();
  ARC_MPI_CHECK(MPI_Ibcast(recv, static_cast<int>(total), MPI_BYTE, 0, node_comm_, &request));
  wait_request(&request, MPI_STATUS_IGNORE, moving_wait(), total);
  record(allgatherv_by_host_traffic(recv_bytes, host_bytes, rank_, host, local_rank_, local_size_));
}

}  // namespace arcreduce
