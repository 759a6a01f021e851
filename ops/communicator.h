// Communicator: the collectives every algorithm above the transport uses. One instance is used by
// one thread at a time (the coordinator). Every call is blocking and in place where it says so.
// Failures throw arcreduce::Error (kInternal) carrying the MPI error string and the call site.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "arcreduce/status.h"

namespace arcreduce {

// Thrown (code kStalled) by a call whose wait saw no progress for longer than the communicator's
// bound (MpiCommunicator: WaitPolicy::timeout, ARCREDUCE_STALL_SHUTDOWN_SECONDS): a peer stopped
// taking part (stopped, hung, or cut off). The call's requests stay posted, so the communicator
// must not be used for collectives afterwards; the job has to end (Communicator::abort).
class CommunicationTimeout : public Error {
 public:
  explicit CommunicationTimeout(std::string message)
      : Error(std::move(message), StatusCode::kStalled) {}
};

// Element types that travel through collectives.
enum class ScalarType {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt64,
  kInt8,
  kInt16,
};
// kSum and kProd on kFloat16/kBFloat16 compute in fp32 and round once per operation. Integer
// sums and products wrap around (two's complement). kMin/kMax on floats propagate NaN.
// kBitAnd/kBitOr act on the bit patterns of any type.
enum class CollectiveOp { kSum, kMin, kMax, kBitAnd, kBitOr, kProd };

// Bytes per element of `type`.
size_t scalar_size(ScalarType type);
// Lower-case names for messages ("float32", "sum", ...).
const char* scalar_type_name(ScalarType type);
const char* collective_op_name(CollectiveOp op);
// Throws Error("<what>: null buffer for <bytes> bytes") when buf is null and bytes > 0: the
// communicators' check of the buffers handed to a collective.
void require_buffer(const void* buf, size_t bytes, const char* what);

// Bytes this communicator put on / took off its transport; used for Stats.
struct TrafficCounters {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  // Communication calls completed (collectives, point-to-point sends/receives and waits): the
  // synchronous rounds a step pays, each waiting for its peers.
  uint64_t calls = 0;
};

// What a communicator ran: allreduce() calls by the algorithm that ran them (its name -> calls,
// payload bytes), the other collectives by kind, and the link the choice was predicted from
// (ops/link_model.h; zeros where none was measured). A step's cost can be modelled from these
// (bench/model): each kind's bytes and rounds follow from its calls and payload.
struct CommunicationUsage {
  std::map<std::string, uint64_t> calls;
  std::map<std::string, uint64_t> bytes;
  // By kind, the payload as each kind defines it: "allgather" this rank's block, "allgatherv"
  // and "gatherv" the gathered total, "alltoallv" what this rank sends to the others,
  // "broadcast" the message, "point_to_point" what this rank sends (send, sendrecv, isend).
  std::map<std::string, uint64_t> collective_calls;
  std::map<std::string, uint64_t> collective_bytes;
  double link_latency_seconds = 0;
  double link_seconds_per_byte = 0;
  // Whether allreduce() reduces within each host first (MpiCommunicator::hierarchical()), and
  // over how many hosts the job runs (1 where unknown).
  bool hierarchical = false;
  int hosts = 1;
};

// A non-blocking point-to-point transfer started by isend()/irecv(). Every active request must
// be completed with Communicator::wait() before its buffer is reused or read, and before the
// communicator is destroyed.
struct P2pRequest {
  uint64_t id = 0;  // 0: nothing in flight (never started, or already completed)
  bool active() const { return id != 0; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks on this host and this rank's index among them.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  // In place: buf holds `count` elements on entry and the reduction over ranks on return,
  // bit-identical on every rank.
  virtual void allreduce(void* buf, size_t count, ScalarType type, CollectiveOp op) = 0;
  // Every rank contributes `bytes`; recv holds size()*bytes, rank r's block at r*bytes.
  virtual void allgather(const void* send, size_t bytes, void* recv) = 0;
  // Rank r contributes recv_bytes[r] bytes (send holds recv_bytes[rank()]); recv holds the
  // blocks back to back in rank order.
  virtual void allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_bytes) = 0;
  // Gathers one variable-sized byte string per rank at `root`: on root, blocks is resized to
  // size() and (*blocks)[r] holds rank r's string; other ranks may pass nullptr.
  virtual void gatherv(const std::string& send, std::vector<std::string>* blocks, int root) = 0;
  // In place broadcast of bytes from `root`.
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  // Broadcasts a variable-sized byte string from `root` (resized on the other ranks).
  virtual void broadcast(std::string* data, int root) = 0;
  // send_bytes[r] bytes from send (back to back) go to rank r; recv_bytes[r] come from rank r.
  virtual void alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                         const std::vector<size_t>& recv_bytes) = 0;
  virtual void send(const void* buf, size_t bytes, int dst, int tag) = 0;
  virtual void recv(void* buf, size_t bytes, int src, int tag) = 0;
  // Simultaneous send to `dst` and receive from `src` (deadlock-free in rings).
  virtual void sendrecv(const void* send_buf, size_t send_bytes, int dst, void* recv_buf,
                        size_t recv_bytes, int src, int tag) = 0;
  // Non-blocking point-to-point on the same channel as send()/recv() (a message sent with one
  // may be received with the other). Messages between one pair of ranks with one tag are
  // received in the order they were sent, and receives match in the order they were posted.
  // The buffer must stay valid (and, for isend, unmodified) until wait() returns. Traffic is
  // counted when the request completes.
  virtual P2pRequest isend(const void* buf, size_t bytes, int dst, int tag) = 0;
  virtual P2pRequest irecv(void* buf, size_t bytes, int src, int tag) = 0;
  // Blocks until `request` completes and resets it; an inactive request returns at once. A
  // receive whose message has another size than posted throws Error (kInternal).
  virtual void wait(P2pRequest* request) = 0;
  virtual void barrier() = 0;
  // Ends the whole job (all ranks) with `code`; used by the stall inspector. Loopback
  // implementations record the call instead of killing the test process.
  virtual void abort(int code, const std::string& reason) = 0;
  // After a CommunicationTimeout: every rank that calls this sends a small message to every
  // other rank on a channel of its own and listens for theirs for `grace`; *silent receives the
  // ranks from which nothing arrived (stopped, hung, or unreachable: ranks stuck in the same
  // collective time out within about one wait of each other and answer). Returns false when the
  // communicator cannot tell (the default). Only for naming ranks before the job is aborted.
  virtual bool find_silent_ranks(std::chrono::milliseconds grace, std::vector<int>* silent) {
    (void)grace;
    (void)silent;
    return false;
  }

  // Several ranks on a host whose exchanges go by host (ARCREDUCE_HIERARCHICAL): by rank, the
  // index of its host, hosts numbered in the order of their first ranks. Empty where every rank
  // exchanges as a host of its own (one host, one rank per host, the hierarchy off, or a
  // communicator that does not place ranks): the default.
  virtual std::vector<int> exchange_hosts() const { return {}; }
  // Only where exchange_hosts() is not empty, called by every rank: sums `count` floats over
  // this host's ranks into the first rank's buf; the other ranks' buf is left as it was. Lets a
  // compressor compress the host's sum once (All-Gather Top-K). Default: throws Error.
  virtual void reduce_within_host(float* buf, size_t count);

  virtual TrafficCounters traffic() const = 0;
  // Empty for communicators that do not choose among algorithms.
  virtual CommunicationUsage communication_usage() const { return {}; }

  // True when allreduce() of `count` elements of `type` with kSum may be handed CUDA device
  // memory (a CUDA-aware MPI doing the whole reduction itself). Default: never, so device
  // buffers are staged through host memory.
  virtual bool allreduce_accepts_device_memory(ScalarType type, size_t count) const {
    (void)type;
    (void)count;
    return false;
  }
};

}  // namespace arcreduce
