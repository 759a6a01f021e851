#include "ops/traffic_estimates.h"

namespace arcreduce {
namespace {

int wrap(int index, int size) {
  return ((index % size) + size) % size;
}

}  // namespace

RingChunk ring_chunk(size_t count, int size, int index) {
  const size_t n = static_cast<size_t>(size);
  const size_t i = static_cast<size_t>(index);
  const size_t base = count / n, extra = count % n;
  RingChunk chunk;
  chunk.count = base + (i < extra ? 1 : 0);
  chunk.offset = i * base + (i < extra ? i : extra);
  return chunk;
}

TrafficCounters allreduce_traffic(size_t count, size_t element_bytes, int size, int rank) {
  // Step t of 2(P-1) sends chunk rank - t and receives chunk rank - t - 1.
  TrafficCounters traffic;
  for (int t = 0; size > 1 && t < 2 * (size - 1); ++t) {
    traffic.bytes_sent += ring_chunk(count, size, wrap(rank - t, size)).count * element_bytes;
    traffic.bytes_received +=
        ring_chunk(count, size, wrap(rank - t - 1, size)).count * element_bytes;
  }
  return traffic;
}

TrafficCounters allgatherv_traffic(const std::vector<size_t>& block_bytes, int rank) {
  TrafficCounters traffic;
  const int size = static_cast<int>(block_bytes.size());
  if (size <= 1) return traffic;
  size_t total = 0;
  for (size_t b : block_bytes) total += b;
  traffic.bytes_sent = total - block_bytes[wrap(rank + 1, size)];
  traffic.bytes_received = total - block_bytes[rank];
  return traffic;
}

TrafficCounters broadcast_traffic(size_t bytes, int size, int rank, int root) {
  TrafficCounters traffic;
  if (size <= 1) return traffic;
  if (rank != root) traffic.bytes_received = bytes;
  if (rank != wrap(root - 1, size)) traffic.bytes_sent = bytes;
  return traffic;
}

TrafficCounters allgatherv_by_host_traffic(const std::vector<size_t>& block_bytes,
                                           const std::vector<size_t>& host_bytes, int rank,
                                           int host, int local_rank, int local_size) {
  size_t total = 0;
  for (size_t b : host_bytes) total += b;
  TrafficCounters traffic = broadcast_traffic(total, local_size, local_rank, 0);
  if (local_rank == 0) {
    add_traffic(&traffic, allgatherv_traffic(host_bytes, host));
    traffic.bytes_received += host_bytes[host] - block_bytes[rank];
  } else {
    traffic.bytes_sent += block_bytes[rank];
  }
  return traffic;
}

TrafficCounters gatherv_traffic(const std::vector<size_t>& block_bytes, int rank, int root) {
  TrafficCounters traffic;
  const int size = static_cast<int>(block_bytes.size());
  if (size <= 1) return traffic;
  if (rank != root) {
    traffic.bytes_sent = block_bytes[rank] + sizeof(uint64_t);
    return traffic;
  }
  for (int r = 0; r < size; ++r) {
    if (r != root) traffic.bytes_received += block_bytes[r] + sizeof(uint64_t);
  }
  return traffic;
}

TrafficCounters alltoallv_traffic(const std::vector<size_t>& send_bytes,
                                  const std::vector<size_t>& recv_bytes, int rank) {
  TrafficCounters traffic;
  for (size_t r = 0; r < send_bytes.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    traffic.bytes_sent += send_bytes[r];
    traffic.bytes_received += recv_bytes[r];
  }
  return traffic;
}

TrafficCounters reduce_to_first_traffic(size_t bytes, int local_size, int local_rank) {
  TrafficCounters traffic;
  if (local_size < 2) return traffic;
  if (local_rank == 0) {
    traffic.bytes_received = bytes * static_cast<size_t>(local_size - 1);
  } else {
    traffic.bytes_sent = bytes;
  }
  return traffic;
}

}  // namespace arcreduce
