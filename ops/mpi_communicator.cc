#include "ops/mpi_communicator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "arcreduce/status.h"
#include "ops/doubling_allreduce.h"
#include "ops/halving_allreduce.h"
#include "ops/link_probe.h"
#include "ops/mpi_check.h"
#include "ops/mpi_cuda_support.h"
#include "ops/mpi_wait.h"
#include "ops/ring_allreduce.h"
#include "ops/traffic_estimates.h"

namespace arcreduce {
namespace {

// Internal tags on ring_comm_ (the ring itself uses tag 0 there).
constexpr int kAllgathervTag = 1;
constexpr int kGathervTag = 2;
constexpr int kAlltoallvTag = 3;
constexpr int kLivenessTag = 4;
constexpr int kDoublingTag = 5;
constexpr int kLinkProbeTag = 6;
constexpr int kRabenseifnerTag = 7;

size_t sum(const std::vector<size_t>& values) {
  size_t total = 0;
  for (size_t v : values) total += v;
  return total;
}

size_t pieces(size_t bytes, size_t limit) {
  return std::max<size_t>(1, (bytes + limit - 1) / limit);
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, AllreduceAlgorithm algorithm)
    : MpiCommunicator(comm, [algorithm] {
        MpiCommunicatorOptions options;
        options.algorithm = algorithm;
        return options;
      }()) {}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, MpiCommunicatorOptions options)
    : options_(options) {
  options_.max_message_bytes =
      std::clamp<size_t>(options_.max_message_bytes, 1, static_cast<size_t>(INT_MAX));
  try {
    ARC_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
    ARC_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    ARC_MPI_CHECK(MPI_Comm_dup(comm_, &ring_comm_));
    ARC_MPI_CHECK(MPI_Comm_set_errhandler(ring_comm_, MPI_ERRORS_RETURN));
    ARC_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    ARC_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    split_hosts();
    const size_t requested_segment = options_.ring_segment_bytes;
    options_.ring_segment_bytes =
        ring_segment_bytes_for(requested_segment, local_size_, size_, options_.max_message_bytes);
    leader_segment_bytes_ =
        ring_segment_bytes_for(requested_segment, 1, hosts_, options_.max_message_bytes);
    int* tag_ub = nullptr;
    int found = 0;
    ARC_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found));
    if (found && tag_ub != nullptr) tag_upper_bound_ = *tag_ub;
    // Only kAuto across hosts predicts, and only a job across hosts has a hierarchy. Every rank
    // knows whether the job spans hosts; whether all of them want a measurement and the hierarchy
    // is agreed first, so that ranks configured differently (an error the runtime reports after
    // construction) never wait in the probe or a host's reduction for each other.
    if (local_size_ < size_) {
      int agreed[4] = {options_.algorithm == AllreduceAlgorithm::kAuto && !options_.link.measured,
                       options_.hierarchy != Hierarchy::kOff, -local_size_, local_size_};
      ARC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, agreed, 4, MPI_INT, MPI_MIN, comm_));
      even_hosts_ = -agreed[2] == agreed[3];
      // Several ranks on some host (uneven hosts too: a host of one rank skips its own stages).
      hierarchical_ = agreed[1] && -agreed[2] > 1 && hosts_ > 1;
      if (agreed[0] && hierarchical_) {
        // The hosts' first ranks measure the link they use; their hosts' ranks learn it.
        if (leader_comm_ != MPI_COMM_NULL) {
          options_.link = probe_link(leader_ring_comm_, kLinkProbeTag, leader_segment_bytes_,
                                     point_to_point(options_.wait));
        }
        // The others wait by the wait policy (sleeping by default): a host's ranks share its
        // CPU, and ranks polling beside the probe would starve it into measuring a slow link.
        MPI_Request request = MPI_REQUEST_NULL;
        ARC_MPI_CHECK(
            MPI_Ibcast(&options_.link, sizeof(LinkModel), MPI_BYTE, 0, node_comm_, &request));
        wait_request(&request, MPI_STATUS_IGNORE, options_.wait, sizeof(LinkModel));
      } else if (agreed[0]) {
        options_.link = probe_link(ring_comm_, kLinkProbeTag, options_.ring_segment_bytes,
                                   point_to_point(options_.wait));
      }
      if (agreed[0] && rank_ == 0) {
        spdlog::debug("arcreduce: link between hosts: {}", describe_link(options_.link));
      }
    }
    cuda_aware_ = choose_device_transport(mpi_cuda_support_compiled(), mpi_cuda_support_runtime(),
                                          nullptr) == DeviceTransport::kCudaAwareMpi;
  } catch (...) {
    release();
    throw;
  }
}

void MpiCommunicator::split_hosts() {
  if (options_.ranks_per_host > 0) {
    ARC_MPI_CHECK(MPI_Comm_split(comm_, rank_ / options_.ranks_per_host, rank_, &node_comm_));
  } else {
    ARC_MPI_CHECK(
        MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_));
  }
  ARC_MPI_CHECK(MPI_Comm_set_errhandler(node_comm_, MPI_ERRORS_RETURN));
  ARC_MPI_CHECK(MPI_Comm_rank(node_comm_, &local_rank_));
  ARC_MPI_CHECK(MPI_Comm_size(node_comm_, &local_size_));
  if (options_.hosts_apart) {
    local_rank_ = 0;
    local_size_ = 1;
  }
  const int color = local_rank_ == 0 ? 0 : MPI_UNDEFINED;
  ARC_MPI_CHECK(MPI_Comm_split(comm_, color, rank_, &leader_comm_));
  int host[2] = {1, 0};  // the hosts, and this host's index among them
  if (leader_comm_ != MPI_COMM_NULL) {
    ARC_MPI_CHECK(MPI_Comm_set_errhandler(leader_comm_, MPI_ERRORS_RETURN));
    ARC_MPI_CHECK(MPI_Comm_size(leader_comm_, &host[0]));
    ARC_MPI_CHECK(MPI_Comm_rank(leader_comm_, &host[1]));
    ARC_MPI_CHECK(MPI_Comm_dup(leader_comm_, &leader_ring_comm_));
    ARC_MPI_CHECK(MPI_Comm_set_errhandler(leader_ring_comm_, MPI_ERRORS_RETURN));
  }
  if (!options_.hosts_apart) ARC_MPI_CHECK(MPI_Bcast(host, 2, MPI_INT, 0, node_comm_));
  ARC_MPI_CHECK(MPI_Comm_split(comm_, local_rank_, rank_, &shard_comm_));
  ARC_MPI_CHECK(MPI_Comm_set_errhandler(shard_comm_, MPI_ERRORS_RETURN));
  ARC_MPI_CHECK(MPI_Comm_dup(shard_comm_, &shard_ring_comm_));
  ARC_MPI_CHECK(MPI_Comm_set_errhandler(shard_ring_comm_, MPI_ERRORS_RETURN));
  hosts_ = host[0];
  host_of_.resize(size_);
  ARC_MPI_CHECK(MPI_Allgather(&host[1], 1, MPI_INT, host_of_.data(), 1, MPI_INT, comm_));
}

MpiCommunicator::~MpiCommunicator() {
  release();
}

void MpiCommunicator::release() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  for (MPI_Comm* c : {&shard_ring_comm_, &shard_comm_, &leader_ring_comm_, &leader_comm_,
                      &node_comm_, &ring_comm_, &comm_}) {
    if (*c == MPI_COMM_NULL) continue;
    if (finalized) {
      spdlog::warn(
          "arcreduce: MPI finalized before MpiCommunicator was destroyed; "
          "duplicated communicator not freed");
    } else if (const int rc = MPI_Comm_free(c); rc != MPI_SUCCESS) {
      spdlog::error("arcreduce: MPI_Comm_free failed: {}", detail::mpi_error_string(rc));
    }
    *c = MPI_COMM_NULL;
  }
}

void MpiCommunicator::check_rank(int peer, const char* what) const {
  if (peer < 0 || peer >= size_) {
    throw Error(std::string(what) + ": rank " + std::to_string(peer) + " out of range [0, " +
                std::to_string(size_) + ")");
  }
}

void MpiCommunicator::check_tag(int tag) const {
  if (tag < 0 || tag > tag_upper_bound_) {
    throw Error("tag " + std::to_string(tag) + " out of range [0, " +
                std::to_string(tag_upper_bound_) + "]");
  }
}

void MpiCommunicator::record(const TrafficCounters& delta) {
  bytes_sent_ += delta.bytes_sent;
  bytes_received_ += delta.bytes_received;
  ++calls_;
}

TrafficCounters MpiCommunicator::traffic() const {
  TrafficCounters t;
  t.bytes_sent = bytes_sent_.load();
  t.bytes_received = bytes_received_.load();
  t.calls = calls_.load();
  return t;
}

CommunicationUsage MpiCommunicator::communication_usage() const {
  CommunicationUsage usage;
  for (size_t i = 0; i < kAlgorithms; ++i) {
    const uint64_t calls = allreduce_calls_[i].load();
    if (calls == 0) continue;
    const char* name = allreduce_algorithm_name(static_cast<AllreduceAlgorithm>(i));
    usage.calls[name] = calls;
    usage.bytes[name] = allreduce_bytes_[i].load();
  }
  static const char* const kKindNames[kKinds] = {"allgather", "allgatherv", "alltoallv",
                                                 "broadcast", "gatherv",    "point_to_point"};
  for (size_t i = 0; i < kKinds; ++i) {
    const uint64_t calls = kind_calls_[i].load();
    if (calls == 0) continue;
    usage.collective_calls[kKindNames[i]] = calls;
    usage.collective_bytes[kKindNames[i]] = kind_bytes_[i].load();
  }
  usage.hierarchical = hierarchical_;
  usage.hosts = hosts_;
  if (options_.link.measured) {
    usage.link_latency_seconds = options_.link.latency_seconds;
    usage.link_seconds_per_byte = options_.link.seconds_per_byte;
  }
  return usage;
}

void MpiCommunicator::count(Kind kind, size_t bytes) {
  kind_calls_[kind] += 1;
  kind_bytes_[kind] += bytes;
}

bool MpiCommunicator::hierarchical_for(size_t bytes) const {
  return hierarchical_ &&
         allreduce_by_host(options_.hierarchy, bytes, hosts_, options_.ring_threshold_bytes);
}

AllreduceAlgorithm MpiCommunicator::algorithm_for(size_t bytes) const {
  const bool by_host = hierarchical_for(bytes);
  if (by_host && sharded()) bytes = (bytes + local_size_ - 1) / local_size_;
  return algorithm_for(bytes, by_host);
}

AllreduceAlgorithm MpiCommunicator::algorithm_for(size_t bytes, bool by_host) const {
  if (by_host) {  // between the hosts' first ranks, one per host
    return choose_allreduce_algorithm(options_.algorithm, bytes, hosts_, 1,
                                      options_.ring_threshold_bytes, options_.link);
  }
  return choose_allreduce_algorithm(options_.algorithm, bytes, size_, local_size_,
                                    options_.ring_threshold_bytes, options_.link);
}

void MpiCommunicator::allreduce(void* buf, size_t count, ScalarType type, CollectiveOp op) {
  const size_t element = scalar_size(type);
  require_buffer(buf, count * element, "allreduce");
  if (size_ == 1 || count == 0) return;
  const bool by_host = hierarchical_for(count * element);
  // Sharded, each rank carries about 1/S of the message across (sharded_allreduce chooses by
  // its own shard; Stats count the choice for 1/S of the bytes).
  AllreduceAlgorithm algorithm = algorithm_for(count * element);
  if ((algorithm == AllreduceAlgorithm::kDoubling ||
       algorithm == AllreduceAlgorithm::kRabenseifner) &&
      count * element > options_.max_message_bytes) {
    algorithm = AllreduceAlgorithm::kRing;  // one message would be too large
  }
  allreduce_calls_[static_cast<size_t>(algorithm)] += 1;
  allreduce_bytes_[static_cast<size_t>(algorithm)] += count * element;
  if (by_host && sharded()) return sharded_allreduce(buf, count, type, op);
  if (by_host) return hierarchical_allreduce(algorithm, buf, count, type, op);
  record(run_allreduce(algorithm, comm_, ring_comm_, options_.ring_segment_bytes, buf, count, type,
                       op));
}

TrafficCounters MpiCommunicator::run_allreduce(AllreduceAlgorithm algorithm, MPI_Comm coll_comm,
                                               MPI_Comm ring, size_t segment_bytes, void* buf,
                                               size_t count, ScalarType type, CollectiveOp op) {
  const WaitPolicy p2p = point_to_point(options_.wait);
  if (algorithm == AllreduceAlgorithm::kRabenseifner) {
    return halving_allreduce(ring, kRabenseifnerTag, buf, count, type, op, segment_bytes,
                             &ring_scratch_, p2p);
  }
  if (algorithm == AllreduceAlgorithm::kDoubling) {
    return doubling_allreduce(ring, kDoublingTag, buf, count, type, op, &ring_scratch_, p2p);
  }
  if (algorithm == AllreduceAlgorithm::kRing) {
    // The link is measured only across hosts, where a segment's receive cannot end before its
    // bytes have crossed it: the ring's receives sleep by that prediction (ops/mpi_wait.h).
    WaitPolicy ring_wait = p2p;
    if (options_.link.measured) ring_wait.seconds_per_byte = options_.link.seconds_per_byte;
    return ring_allreduce(ring, buf, count, type, op, segment_bytes, &ring_scratch_, ring_wait);
  }
  const size_t element = scalar_size(type);
  const MpiReduction reduction = reduce_ops_.lookup(type, op);
  const size_t step = std::max<size_t>(1, options_.max_message_bytes / element);
  char* data = static_cast<char*>(buf);
  for (size_t done = 0; done < count; done += step) {
    const int n = static_cast<int>(std::min(step, count - done));
    MPI_Request request = MPI_REQUEST_NULL;
    ARC_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data + done * element, n, reduction.datatype,
                                 reduction.op, coll_comm, &request));
    wait_request(&request, MPI_STATUS_IGNORE, options_.wait, static_cast<size_t>(n) * element);
  }
  int ranks = 1, rank = 0;
  ARC_MPI_CHECK(MPI_Comm_size(coll_comm, &ranks));
  ARC_MPI_CHECK(MPI_Comm_rank(coll_comm, &rank));
  return allreduce_traffic(count, element, ranks, rank);
}

bool MpiCommunicator::allreduce_accepts_device_memory(ScalarType type, size_t count) const {
  const size_t bytes = count * scalar_size(type);
  if (hierarchical_for(bytes)) return false;  // the host stages read host memory
  return mpi_takes_device_buffer(cuda_aware_, type, algorithm_for(bytes, false));
}

void MpiCommunicator::allgather(const void* send, size_t bytes, void* recv) {
  require_buffer(send, bytes, "allgather");
  require_buffer(recv, bytes * size_, "allgather");
  if (bytes > options_.max_message_bytes) {
    return allgatherv(send, recv, std::vector<size_t>(size_, bytes));
  }
  count(kAllgather, bytes);
  if (hierarchical_ && bytes > 0 && bytes * size_ <= options_.max_message_bytes) {
    return allgatherv_by_host(send, recv, std::vector<size_t>(size_, bytes), bytes * size_);
  }
  if (bytes > 0) {
    MPI_Request request = MPI_REQUEST_NULL;
    ARC_MPI_CHECK(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv,
                                 static_cast<int>(bytes), MPI_BYTE, comm_, &request));
    wait_request(&request, MPI_STATUS_IGNORE, options_.wait, bytes * size_);
  }
  record(allgatherv_traffic(std::vector<size_t>(size_, bytes), rank_));
}

void MpiCommunicator::allgatherv(const void* send, void* recv,
                                 const std::vector<size_t>& recv_bytes) {
  if (recv_bytes.size() != static_cast<size_t>(size_)) {
    throw Error("allgatherv: recv_bytes has " + std::to_string(recv_bytes.size()) +
                " entries, communicator size is " + std::to_string(size_));
  }
  const size_t total = sum(recv_bytes);
  require_buffer(send, recv_bytes[rank_], "allgatherv");
  require_buffer(recv, total, "allgatherv");
  count(kAllgatherv, total);
  if (total == 0) return;
  // Displacements are ints too, so MPI_Allgatherv needs the whole result to fit.
  if (total > options_.max_message_bytes) {
    ring_allgatherv(send, recv, recv_bytes);
    record(allgatherv_traffic(recv_bytes, rank_));
    return;
  }
  if (hierarchical_) return allgatherv_by_host(send, recv, recv_bytes, total);
  std::vector<int> counts(size_), displs(size_);
  size_t offset = 0;
  for (int r = 0; r < size_; ++r) {
    counts[r] = static_cast<int>(recv_bytes[r]);
    displs[r] = static_cast<int>(offset);
    offset += recv_bytes[r];
  }
  MPI_Request request = MPI_REQUEST_NULL;
  ARC_MPI_CHECK(MPI_Iallgatherv(send, counts[rank_], MPI_BYTE, recv, counts.data(), displs.data(),
                                MPI_BYTE, comm_, &request));
  wait_request(&request, MPI_STATUS_IGNORE, options_.wait, total);
  record(allgatherv_traffic(recv_bytes, rank_));
}

// Ring all-gather for results beyond max_message_bytes: step s forwards block (rank - s) to the
// right neighbour and receives block (rank - s - 1) from the left one.
void MpiCommunicator::ring_allgatherv(const void* send, void* recv,
                                      const std::vector<size_t>& recv_bytes) {
  std::vector<size_t> offsets(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) offsets[r + 1] = offsets[r] + recv_bytes[r];
  char* out = static_cast<char*>(recv);
  if (recv_bytes[rank_] > 0) std::memmove(out + offsets[rank_], send, recv_bytes[rank_]);
  const int right = (rank_ + 1) % size_, left = (rank_ - 1 + size_) % size_;
  for (int s = 0; s < size_ - 1; ++s) {
    const int send_block = (rank_ - s + size_) % size_;
    const int recv_block = (rank_ - s - 1 + 2 * size_) % size_;
    Pending pending;
    post_recv(out + offsets[recv_block], recv_bytes[recv_block], left, kAllgathervTag, ring_comm_,
              &pending);
    post_send(out + offsets[send_block], recv_bytes[send_block], right, kAllgathervTag, ring_comm_,
              &pending);
    wait_all(&pending);
  }
}

void MpiCommunicator::gatherv(const std::string& send, std::vector<std::string>* blocks, int root) {
  check_rank(root, "gatherv");
  if (rank_ == root && blocks == nullptr) throw Error("gatherv: root needs a blocks vector");
  // Every rank learns every size, so all agree on whether MPI_Gatherv's int counts suffice.
  std::vector<uint64_t> sizes(size_);
  const uint64_t own = send.size();
  MPI_Request request = MPI_REQUEST_NULL;
  ARC_MPI_CHECK(
      MPI_Iallgather(&own, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm_, &request));
  wait_request(&request, MPI_STATUS_IGNORE, options_.wait, sizeof(uint64_t) * size_);
  std::vector<size_t> block_bytes(sizes.begin(), sizes.end());
  const size_t total = sum(block_bytes);
  count(kGatherv, total);
  if (rank_ == root) {
    blocks->assign(size_, std::string());
    for (int r = 0; r < size_; ++r) (*blocks)[r].resize(block_bytes[r]);
  }
  if (total <= options_.max_message_bytes) {
    std::vector<char> gathered(rank_ == root ? total : 0);
    std::vector<int> counts(size_), displs(size_);
    for (int r = 0, offset = 0; r < size_; ++r) {
      counts[r] = static_cast<int>(block_bytes[r]);
      displs[r] = offset;
      offset += counts[r];
    }
    ARC_MPI_CHECK(MPI_Igatherv(send.data(), counts[rank_], MPI_BYTE, gathered.data(), counts.data(),
                               displs.data(), MPI_BYTE, root, comm_, &request));
    wait_request(&request, MPI_STATUS_IGNORE, options_.wait, total);
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r) {
        if (counts[r] > 0) std::memcpy(&(*blocks)[r][0], gathered.data() + displs[r], counts[r]);
      }
    }
  } else {
    Pending pending;
    if (rank_ == root) {
      (*blocks)[root] = send;
      for (int r = 0; r < size_; ++r) {
        if (r != root) {
          post_recv(&(*blocks)[r][0], block_bytes[r], r, kGathervTag, ring_comm_, &pending);
        }
      }
    } else {
      post_send(send.data(), send.size(), root, kGathervTag, ring_comm_, &pending);
    }
    wait_all(&pending);
  }
  record(gatherv_traffic(block_bytes, rank_, root));
}

void MpiCommunicator::broadcast(void* buf, size_t bytes, int root) {
  check_rank(root, "broadcast");
  require_buffer(buf, bytes, "broadcast");
  count(kBroadcast, bytes);
  char* data = static_cast<char*>(buf);
  for (size_t done = 0; done < bytes; done += options_.max_message_bytes) {
    const int n = static_cast<int>(std::min(options_.max_message_bytes, bytes - done));
    MPI_Request request = MPI_REQUEST_NULL;
    ARC_MPI_CHECK(MPI_Ibcast(data + done, n, MPI_BYTE, root, comm_, &request));
    wait_request(&request, MPI_STATUS_IGNORE, options_.wait, static_cast<size_t>(n));
  }
  record(broadcast_traffic(bytes, size_, rank_, root));
}

void MpiCommunicator::broadcast(std::string* data, int root) {
  check_rank(root, "broadcast");
  if (data == nullptr) throw Error("broadcast: null string");
  uint64_t length = data->size();
  broadcast(&length, sizeof(length), root);
  if (rank_ != root) data->resize(length);
  broadcast(length > 0 ? &(*data)[0] : nullptr, length, root);
}

void MpiCommunicator::alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                                const std::vector<size_t>& recv_bytes) {
  if (send_bytes.size() != static_cast<size_t>(size_) ||
      recv_bytes.size() != static_cast<size_t>(size_)) {
    throw Error("alltoallv: send_bytes/recv_bytes need " + std::to_string(size_) +
                " entries, got " + std::to_string(send_bytes.size()) + "/" +
                std::to_string(recv_bytes.size()));
  }
  require_buffer(send, sum(send_bytes), "alltoallv");
  require_buffer(recv, sum(recv_bytes), "alltoallv");
  // Posted as non-blocking point-to-point rather than MPI_Alltoallv: only this rank knows its own
  // sizes, so this is the one way to split oversized blocks without an extra agreement round.
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  std::vector<size_t> send_offsets(size_, 0), recv_offsets(size_, 0);
  for (int r = 1; r < size_; ++r) {
    send_offsets[r] = send_offsets[r - 1] + send_bytes[r - 1];
    recv_offsets[r] = recv_offsets[r - 1] + recv_bytes[r - 1];
  }
  if (send_bytes[rank_] != recv_bytes[rank_]) {
    throw Error("alltoallv: rank " + std::to_string(rank_) + " sends " +
                std::to_string(send_bytes[rank_]) + " bytes to itself but expects " +
                std::to_string(recv_bytes[rank_]));
  }
  count(kAlltoallv, sum(send_bytes) - send_bytes[rank_]);
  Pending pending;
  for (int s = 1; s < size_; ++s) {
    const int src = (rank_ - s + size_) % size_;
    post_recv(out + recv_offsets[src], recv_bytes[src], src, kAlltoallvTag, ring_comm_, &pending);
  }
  for (int s = 1; s < size_; ++s) {
    const int dst = (rank_ + s) % size_;
    post_send(in + send_offsets[dst], send_bytes[dst], dst, kAlltoallvTag, ring_comm_, &pending);
  }
  if (send_bytes[rank_] > 0) {
    std::memmove(out + recv_offsets[rank_], in + send_offsets[rank_], send_bytes[rank_]);
  }
  wait_all(&pending);
  record(alltoallv_traffic(send_bytes, recv_bytes, rank_));
}

void MpiCommunicator::post_send(const void* buf, size_t bytes, int dst, int tag, MPI_Comm comm,
                                Pending* pending) {
  const char* data = static_cast<const char*>(buf);
  const size_t limit = options_.max_message_bytes;
  pending->bytes += bytes;
  for (size_t i = 0, n = pieces(bytes, limit); i < n; ++i) {
    const size_t length = std::min(limit, bytes - i * limit);
    pending->requests.push_back(MPI_REQUEST_NULL);
    pending->expected_bytes.push_back(-1);
    ARC_MPI_CHECK(MPI_Isend(data + i * limit, static_cast<int>(length), MPI_BYTE, dst, tag, comm,
                            &pending->requests.back()));
  }
}

void MpiCommunicator::post_recv(void* buf, size_t bytes, int src, int tag, MPI_Comm comm,
                                Pending* pending) {
  char* data = static_cast<char*>(buf);
  const size_t limit = options_.max_message_bytes;
  pending->bytes += bytes;
  for (size_t i = 0, n = pieces(bytes, limit); i < n; ++i) {
    const size_t length = std::min(limit, bytes - i * limit);
    pending->requests.push_back(MPI_REQUEST_NULL);
    pending->expected_bytes.push_back(static_cast<long long>(length));
    ARC_MPI_CHECK(MPI_Irecv(data + i * limit, static_cast<int>(length), MPI_BYTE, src, tag, comm,
                            &pending->requests.back()));
  }
}

void MpiCommunicator::wait_all(Pending* pending) {
  if (pending->requests.empty()) return;
  std::vector<MPI_Status> statuses(pending->requests.size());
  wait_requests(pending->requests.data(), static_cast<int>(pending->requests.size()),
                statuses.data(), point_to_point(options_.wait), pending->bytes);
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (pending->expected_bytes[i] < 0) continue;
    int received = 0;
    ARC_MPI_CHECK(MPI_Get_count(&statuses[i], MPI_BYTE, &received));
    if (received != pending->expected_bytes[i]) {
      throw Error("received " + std::to_string(received) + " bytes from rank " +
                      std::to_string(statuses[i].MPI_SOURCE) + " (tag " +
                      std::to_string(statuses[i].MPI_TAG) + "), expected " +
                      std::to_string(pending->expected_bytes[i]) +
                      ": sender and receiver disagree on the message size",
                  StatusCode::kInternal);
    }
  }
}

void MpiCommunicator::send(const void* buf, size_t bytes, int dst, int tag) {
  check_rank(dst, "send");
  check_tag(tag);
  require_buffer(buf, bytes, "send");
  count(kPointToPoint, bytes);
  Pending pending;
  post_send(buf, bytes, dst, tag, comm_, &pending);
  wait_all(&pending);
  record({bytes, 0});
}

void MpiCommunicator::recv(void* buf, size_t bytes, int src, int tag) {
  check_rank(src, "recv");
  check_tag(tag);
  require_buffer(buf, bytes, "recv");
  Pending pending;
  post_recv(buf, bytes, src, tag, comm_, &pending);
  wait_all(&pending);
  record({0, bytes});
}

void MpiCommunicator::sendrecv(const void* send_buf, size_t send_bytes, int dst, void* recv_buf,
                               size_t recv_bytes, int src, int tag) {
  check_rank(dst, "sendrecv");
  check_rank(src, "sendrecv");
  check_tag(tag);
  require_buffer(send_buf, send_bytes, "sendrecv");
  require_buffer(recv_buf, recv_bytes, "sendrecv");
  count(kPointToPoint, send_bytes);
  Pending pending;
  post_recv(recv_buf, recv_bytes, src, tag, comm_, &pending);
  post_send(send_buf, send_bytes, dst, tag, comm_, &pending);
  wait_all(&pending);
  record({send_bytes, recv_bytes});
}

P2pRequest MpiCommunicator::start(Transfer transfer) {
  P2pRequest request{next_request_++};
  transfers_.emplace(request.id, std::move(transfer));
  return request;
}

P2pRequest MpiCommunicator::isend(const void* buf, size_t bytes, int dst, int tag) {
  check_rank(dst, "isend");
  check_tag(tag);
  require_buffer(buf, bytes, "isend");
  count(kPointToPoint, bytes);
  Transfer transfer;
  transfer.bytes = bytes;
  transfer.send = true;
  post_send(buf, bytes, dst, tag, comm_, &transfer.pending);
  return start(std::move(transfer));
}

P2pRequest MpiCommunicator::irecv(void* buf, size_t bytes, int src, int tag) {
  check_rank(src, "irecv");
  check_tag(tag);
  require_buffer(buf, bytes, "irecv");
  Transfer transfer;
  transfer.bytes = bytes;
  post_recv(buf, bytes, src, tag, comm_, &transfer.pending);
  return start(std::move(transfer));
}

void MpiCommunicator::wait(P2pRequest* request) {
  if (request == nullptr || !request->active()) return;
  auto it = transfers_.find(request->id);
  if (it == transfers_.end()) {
    throw Error("wait: request " + std::to_string(request->id) + " is not in flight");
  }
  Transfer transfer = std::move(it->second);
  transfers_.erase(it);
  *request = P2pRequest{};
  wait_all(&transfer.pending);
  record(transfer.send ? TrafficCounters{transfer.bytes, 0} : TrafficCounters{0, transfer.bytes});
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  ARC_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  wait_request(&request, MPI_STATUS_IGNORE, options_.wait);
  record({});
}

bool MpiCommunicator::find_silent_ranks(std::chrono::milliseconds grace, std::vector<int>* silent) {
  silent->clear();
  if (size_ == 1) return true;
  // The byte sent must outlive this call: a send to a stopped rank may never complete and is
  // released, not waited for.
  static const char kAlive = 1;
  std::vector<char> answers(static_cast<size_t>(size_), 0);
  std::vector<MPI_Request> receives(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    ARC_MPI_CHECK(MPI_Irecv(&answers[static_cast<size_t>(peer)], 1, MPI_CHAR, peer, kLivenessTag,
                            ring_comm_, &receives[static_cast<size_t>(peer)]));
    MPI_Request send = MPI_REQUEST_NULL;
    ARC_MPI_CHECK(MPI_Isend(&kAlive, 1, MPI_CHAR, peer, kLivenessTag, ring_comm_, &send));
    ARC_MPI_CHECK(MPI_Request_free(&send));
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  std::vector<bool> answered(static_cast<size_t>(size_), false);
  answered[static_cast<size_t>(rank_)] = true;
  int missing = size_ - 1;
  while (missing > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int peer = 0; peer < size_; ++peer) {
      if (answered[static_cast<size_t>(peer)]) continue;
      int done = 0;
      ARC_MPI_CHECK(MPI_Test(&receives[static_cast<size_t>(peer)], &done, MPI_STATUS_IGNORE));
      if (done) {
        answered[static_cast<size_t>(peer)] = true;
        --missing;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (answered[static_cast<size_t>(peer)]) continue;
    silent->push_back(peer);
    MPI_Request& r = receives[static_cast<size_t>(peer)];
    ARC_MPI_CHECK(MPI_Cancel(&r));
    ARC_MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));  // a cancelled receive completes locally
  }
  return true;
}

void MpiCommunicator::abort(int code, const std::string& reason) {
  spdlog::error("arcreduce: rank {} aborts the job with code {}: {}", rank_, code, reason);
  MPI_Abort(comm_, code);
  // MPI_Abort should not return; if the library does return, end this process at least.
  std::abort();
}

}  // namespace arcreduce
