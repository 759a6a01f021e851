// Communicator over MPI. Construction duplicates the given communicator twice (collectives and
// user point-to-point on one, the ring and internal point-to-point on the other, so our traffic
// never matches a user's message) and sets MPI_ERRORS_RETURN on both, so failures surface as
// arcreduce::Error(kInternal) via ARC_MPI_CHECK instead of aborting. Construction is collective
// over `comm`. The caller keeps MPI initialised (MPI_THREAD_MULTIPLE if other threads use MPI
// concurrently) for the object's lifetime.
//
// Messages and counts above max_message_bytes (INT_MAX by default) are split, so every call takes
// any size_t size. Traffic counting: see ops/traffic_estimates.h (exact for point-to-point, the
// ring and split fallbacks; ring/chain/direct estimates for calls delegated to MPI collectives).
#pragma once

#include "ops/mpi_include.h"

#include <array>
#include <atomic>
#include <climits>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "ops/allreduce_algorithm.h"
#include "ops/communicator.h"
#include "ops/link_model.h"
#include "ops/mpi_reduce_ops.h"
#include "ops/mpi_wait.h"

namespace arcreduce {

struct MpiCommunicatorOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  // kThresholds (and kAuto without a measured link) use the ring for messages of at least this
  // many bytes when the job spans hosts and has three ranks or more (resolve_allreduce_algorithm).
  size_t ring_threshold_bytes = kRingThresholdBytes;
  // kAuto across hosts: the link it predicts by (ops/link_model.h). Measured by construction
  // (ops/link_probe.h) unless given here with measured = true (tests, a model chosen by hand).
  LinkModel link;
  // Ring pipelining granularity (docs/design/communicators-allreduce.md has the measurements); 0
  // picks kSingleHostRingSegmentBytes on one host and kMultiHostRingSegmentBytes across hosts.
  size_t ring_segment_bytes = 0;
  // Largest single MPI message or count; larger transfers are split. Tests lower it to exercise
  // the split paths; values above INT_MAX are clamped.
  size_t max_message_bytes = INT_MAX;
  // How every call waits for its MPI requests (ARCREDUCE_WAIT_MODE; ops/mpi_wait.h).
  WaitPolicy wait;
  // Tests: every rank counts as a host of its own (local_size() 1), so that the choices made
  // across hosts (the link probe, kAuto's model) run on one machine.
  bool hosts_apart = false;
  // Reduce within each host before the exchange across hosts (ARCREDUCE_HIERARCHICAL).
  Hierarchy hierarchy = Hierarchy::kAuto;
  // Tests: ranks [0, n), [n, 2n), ... count as one host each instead of the ranks that share
  // memory, so that the hierarchical paths run on one machine; 0: the machine's hosts.
  int ranks_per_host = 0;
};

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm, MpiCommunicatorOptions options = {});
  MpiCommunicator(MPI_Comm comm, AllreduceAlgorithm algorithm);
  // Frees the duplicates; never throws (logs through spdlog instead).
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void allreduce(void* buf, size_t count, ScalarType type, CollectiveOp op) override;
  void allgather(const void* send, size_t bytes, void* recv) override;
  void allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_bytes) override;
  void gatherv(const std::string& send, std::vector<std::string>* blocks, int root) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void broadcast(std::string* data, int root) override;
  void alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                 const std::vector<size_t>& recv_bytes) override;
  void send(const void* buf, size_t bytes, int dst, int tag) override;
  void recv(void* buf, size_t bytes, int src, int tag) override;
  void sendrecv(const void* send_buf, size_t send_bytes, int dst, void* recv_buf, size_t recv_bytes,
                int src, int tag) override;
  P2pRequest isend(const void* buf, size_t bytes, int dst, int tag) override;
  P2pRequest irecv(void* buf, size_t bytes, int src, int tag) override;
  void wait(P2pRequest* request) override;
  void barrier() override;
  // Logs `reason` at error level, then MPI_Abort on the whole job; does not return.
  void abort(int code, const std::string& reason) override;
  // One byte to and from every other rank on the internal duplicate (its own tag), polled for
  // `grace`; unanswered receives are cancelled, sends released.
  bool find_silent_ranks(std::chrono::milliseconds grace, std::vector<int>* silent) override;

  std::vector<int> exchange_hosts() const override;
  void reduce_within_host(float* buf, size_t count) override;
  TrafficCounters traffic() const override;
  CommunicationUsage communication_usage() const override;
  bool allreduce_accepts_device_memory(ScalarType type, size_t count) const override;

  // The algorithm allreduce() would use for a message of `bytes` (resolves kAuto); by host, the
  // one used between hosts: for the whole message by the hosts' first ranks, or sharded for
  // (bytes + S - 1) / S.
  AllreduceAlgorithm algorithm_for(size_t bytes) const;
  // True where allreduce() may reduce within each host first: several ranks on a host of a job
  // that spans hosts, and the hierarchy not turned off (on every rank: construction agrees on it).
  bool hierarchical() const { return hierarchical_; }
  // Whether a message of `bytes` goes by host: with Hierarchy::kOn every one; with kAuto those
  // the ring would carry between the hosts (the thresholds' choice for one rank per host). Smaller
  // messages stay flat: the trees pair ranks by increasing distance, so with a host's ranks
  // numbered together their first rounds stay within the host, and Rabenseifner's rounds across
  // hosts carry pieces 1/S of the message (docs/design/communicators-several-ranks-per-host.md).
  bool hierarchical_for(size_t bytes) const;
  // Whether what goes by host is sharded over the host's ranks (every host runs local_size()
  // ranks and the hierarchy is not kLeader); else the host's first rank exchanges it alone.
  bool sharded() const {
    return hierarchical_ && even_hosts_ && options_.hierarchy != Hierarchy::kLeader;
  }
  int hosts() const { return hosts_; }
  const MpiCommunicatorOptions& options() const { return options_; }
  // The duplicate used for collectives and user point-to-point (owned; do not free).
  MPI_Comm comm() const { return comm_; }

 private:
  void check_rank(int peer, const char* what) const;
  void check_tag(int tag) const;
  void record(const TrafficCounters& delta);
  // Non-blocking requests of one call; receives remember their expected size so that a shorter
  // message is reported instead of silently leaving stale bytes.
  struct Pending {
    std::vector<MPI_Request> requests;
    std::vector<long long> expected_bytes;  // -1 for sends
    size_t bytes = 0;                       // sent and received, for WaitHistory
  };
  // Post the pieces (each <= max_message_bytes) of one message; both sides split identically.
  void post_send(const void* buf, size_t bytes, int dst, int tag, MPI_Comm comm, Pending* pending);
  void post_recv(void* buf, size_t bytes, int src, int tag, MPI_Comm comm, Pending* pending);
  void wait_all(Pending* pending);
  // A transfer of isend()/irecv() until wait(): its MPI requests and its size for the counters.
  struct Transfer {
    Pending pending;
    size_t bytes = 0;
    bool send = false;
  };
  P2pRequest start(Transfer transfer);
  void ring_allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_bytes);
  // Splits the hosts: node_comm_ (this host's ranks), leader_comm_/leader_ring_comm_ (every
  // host's first rank; MPI_COMM_NULL elsewhere), shard_comm_/shard_ring_comm_ (every host's rank
  // of this local rank); sets local_rank_, local_size_, hosts_ and host_of_.
  void split_hosts();
  // The algorithm of a message of `bytes` sent flat or (by_host) between the hosts' first ranks.
  AllreduceAlgorithm algorithm_for(size_t bytes, bool by_host) const;
  // `algorithm` over `comm` (ring_comm for our own algorithms, coll_comm for MPI's).
  TrafficCounters run_allreduce(AllreduceAlgorithm algorithm, MPI_Comm coll_comm, MPI_Comm ring,
                                size_t segment_bytes, void* buf, size_t count, ScalarType type,
                                CollectiveOp op);
  // The stages by host (ops/mpi_host_stages.cc). The All-Reduce: within the host to its first
  // rank, across hosts among first ranks, back within the host. The All-Gather (of `total` <=
  // max_message_bytes bytes): gathered at each host's first rank, All-Gathered among them, handed
  // back within the host.
  void hierarchical_allreduce(AllreduceAlgorithm algorithm, void* buf, size_t count,
                              ScalarType type, CollectiveOp op);
  // On even hosts (unless Hierarchy::kLeader): reduce-scattered within the host, each local
  // rank's shard All-Reduced across hosts with the other hosts' ranks of its local rank,
  // All-Gathered back within the host; in pieces of kHostPieceBytes, pipelined.
  // 1 MiB: 0.96x the 2 MiB pieces' step at 1 Gbit/s, equal at 100 Mbit/s (hierarchy-log.md).
  static constexpr size_t kHostPieceBytes = size_t{1} << 20;
  void sharded_allreduce(void* buf, size_t count, ScalarType type, CollectiveOp op);
  void allgatherv_by_host(const void* send, void* recv, const std::vector<size_t>& recv_bytes,
                          size_t total);
  // The host's ranks meet (waiting by the wait policy); the wait while a host stage moves data.
  void meet_host();
  WaitPolicy moving_wait() const;
  // Sums buf over the host's ranks into its first rank's (pieces of max_message_bytes); adds the
  // stage's traffic to *traffic.
  void reduce_to_first(void* buf, size_t count, ScalarType type, CollectiveOp op,
                       TrafficCounters* traffic);
  void release() noexcept;

  MpiCommunicatorOptions options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm ring_comm_ = MPI_COMM_NULL;
  MPI_Comm node_comm_ = MPI_COMM_NULL, leader_comm_ = MPI_COMM_NULL;
  MPI_Comm leader_ring_comm_ = MPI_COMM_NULL;
  MPI_Comm shard_comm_ = MPI_COMM_NULL, shard_ring_comm_ = MPI_COMM_NULL;
  bool even_hosts_ = false;  // every host runs local_size_ ranks
  // This rank's shards of the two pieces in flight (sharded_allreduce).
  std::array<std::vector<char>, 2> shards_;
  int hosts_ = 1;
  std::vector<int> host_of_;  // by rank: its host's index among the hosts' first ranks
  bool hierarchical_ = false;
  size_t leader_segment_bytes_ = 0;  // the ring's segment between hosts (hierarchical)
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  int tag_upper_bound_ = 32767;
  bool cuda_aware_ = false;  // choose_device_transport() at construction
  MpiReduceOps reduce_ops_;
  std::vector<char> ring_scratch_;
  std::map<uint64_t, Transfer> transfers_;  // by P2pRequest::id
  uint64_t next_request_ = 1;
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, calls_{0};
  // allreduce() calls and their payload bytes, by the algorithm that ran them (enum order).
  static constexpr size_t kAlgorithms = static_cast<size_t>(AllreduceAlgorithm::kThresholds) + 1;
  std::array<std::atomic<uint64_t>, kAlgorithms> allreduce_calls_{}, allreduce_bytes_{};
  // The other collectives' calls and payload bytes (CommunicationUsage), by kind.
  enum Kind : size_t { kAllgather, kAllgatherv, kAlltoallv, kBroadcast, kGatherv, kPointToPoint };
  static constexpr size_t kKinds = kPointToPoint + 1;
  void count(Kind kind, size_t bytes);
  std::array<std::atomic<uint64_t>, kKinds> kind_calls_{}, kind_bytes_{};
};

}  // namespace arcreduce
