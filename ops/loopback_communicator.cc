#include "ops/loopback_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "arcreduce/status.h"
#include "ops/loopback_state.h"
#include "ops/reduce_kernels.h"
#include "ops/traffic_estimates.h"

namespace arcreduce {
namespace {

std::vector<char> snapshot(const void* data, size_t bytes) {
  const char* begin = static_cast<const char*>(data);
  return bytes == 0 ? std::vector<char>() : std::vector<char>(begin, begin + bytes);
}

std::string join(const std::vector<size_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text + "]";
}

class LoopbackCommunicator : public Communicator {
 public:
  LoopbackCommunicator(std::shared_ptr<LoopbackState> state, int rank)
      : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->size(); }
  int local_rank() const override {
    const int per_host = state_->ranks_per_host();
    return per_host > 0 ? rank_ % per_host : rank_;
  }
  int local_size() const override {
    const int per_host = state_->ranks_per_host();
    if (per_host <= 0) return size();
    const int host_start = rank_ / per_host * per_host;
    return std::min(per_host, size() - host_start);
  }

  void allreduce(void* buf, size_t count, ScalarType type, CollectiveOp op) override {
    const size_t bytes = count * scalar_size(type);
    require_buffer(buf, bytes, "allreduce");
    Contribution mine("allreduce(count=" + std::to_string(count) + ", type=" +
                          scalar_type_name(type) + ", op=" + collective_op_name(op) + ")",
                      snapshot(buf, bytes));
    // Every rank decides alike: the decision depends only on the call and the world.
    const bool by_host = hierarchical() && allreduce_by_host(state_->hierarchy(), bytes, hosts(),
                                                             kRingThresholdBytes);
    const int per_host = by_host ? state_->ranks_per_host() : size();
    collective(
        std::move(mine),
        [&](const std::vector<Contribution>& slots, std::vector<char>* result) {
          // Flat: one group of all ranks. By host: each host's ranks in rank order, then the
          // hosts' sums in host order.
          for (size_t first = 0; first < slots.size(); first += per_host) {
            std::vector<char> group = slots[first].data;
            const size_t end = std::min(slots.size(), first + per_host);
            for (size_t r = first + 1; r < end; ++r) {
              reduce_into(group.data(), slots[r].data.data(), count, type, op);
            }
            if (first == 0) {
              *result = std::move(group);
            } else {
              reduce_into(result->data(), group.data(), count, type, op);
            }
          }
        },
        [&](const std::vector<Contribution>&, const std::vector<char>& result) {
          if (bytes > 0) std::memcpy(buf, result.data(), bytes);
        });
    if (size() == 1) return;
    if (!by_host) {
      record(allreduce_traffic(count, scalar_size(type), size(), rank_));
      return;
    }
    // MpiCommunicator's host stages: a reduce into the host's first rank, the first ranks'
    // All-Reduce, a broadcast back.
    TrafficCounters traffic = reduce_to_first_traffic(bytes, local_size(), local_rank());
    if (local_rank() == 0) {
      add_traffic(&traffic, allreduce_traffic(count, scalar_size(type), hosts(), rank_ / per_host));
    }
    if (local_size() > 1)
      add_traffic(&traffic, broadcast_traffic(bytes, local_size(), local_rank(), 0));
    record(traffic);
  }

  void allgather(const void* send, size_t bytes, void* recv) override {
    require_buffer(send, bytes, "allgather");
    require_buffer(recv, bytes * size(), "allgather");
    Contribution mine("allgather(bytes=" + std::to_string(bytes) + ")", snapshot(send, bytes));
    collective(std::move(mine), nullptr,
               [&](const std::vector<Contribution>& slots, const std::vector<char>&) {
                 for (size_t r = 0; r < slots.size(); ++r) {
                   if (bytes > 0)
                     std::memcpy(static_cast<char*>(recv) + r * bytes, slots[r].data.data(), bytes);
                 }
               });
    record(allgather_traffic(std::vector<size_t>(size(), bytes)));
  }

  void allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_bytes) override {
    if (recv_bytes.size() != static_cast<size_t>(size())) {
      throw Error("allgatherv: recv_bytes has " + std::to_string(recv_bytes.size()) +
                  " entries, communicator size is " + std::to_string(size()));
    }
    size_t total = 0;
    for (size_t b : recv_bytes) total += b;
    require_buffer(send, recv_bytes[rank_], "allgatherv");
    require_buffer(recv, total, "allgatherv");
    Contribution mine("allgatherv(recv_bytes=" + join(recv_bytes) + ")",
                      snapshot(send, recv_bytes[rank_]));
    collective(std::move(mine), nullptr,
               [&](const std::vector<Contribution>& slots, const std::vector<char>&) {
                 char* out = static_cast<char*>(recv);
                 for (const Contribution& slot : slots) {
                   if (!slot.data.empty()) std::memcpy(out, slot.data.data(), slot.data.size());
                   out += slot.data.size();
                 }
               });
    record(allgather_traffic(recv_bytes));
  }

  void gatherv(const std::string& send, std::vector<std::string>* blocks, int root) override {
    check_rank(root, "gatherv");
    if (rank_ == root && blocks == nullptr) throw Error("gatherv: root needs a blocks vector");
    Contribution mine("gatherv(root=" + std::to_string(root) + ")",
                      snapshot(send.data(), send.size()));
    std::vector<size_t> sizes(size(), 0);
    sizes[rank_] = send.size();
    collective(std::move(mine), nullptr,
               [&](const std::vector<Contribution>& slots, const std::vector<char>&) {
                 if (rank_ != root) return;
                 blocks->assign(slots.size(), std::string());
                 for (size_t r = 0; r < slots.size(); ++r) {
                   (*blocks)[r].assign(slots[r].data.begin(), slots[r].data.end());
                   sizes[r] = slots[r].data.size();
                 }
               });
    record(gatherv_traffic(sizes, rank_, root));
  }

  void broadcast(void* buf, size_t bytes, int root) override {
    check_rank(root, "broadcast");
    require_buffer(buf, bytes, "broadcast");
    Contribution mine(
        "broadcast(bytes=" + std::to_string(bytes) + ", root=" + std::to_string(root) + ")",
        rank_ == root ? snapshot(buf, bytes) : std::vector<char>());
    collective(std::move(mine), nullptr,
               [&](const std::vector<Contribution>& slots, const std::vector<char>&) {
                 if (rank_ != root && bytes > 0) std::memcpy(buf, slots[root].data.data(), bytes);
               });
    record(broadcast_traffic(bytes, size(), rank_, root));
  }

  void broadcast(std::string* data, int root) override {
    check_rank(root, "broadcast");
    if (data == nullptr) throw Error("broadcast: null string");
    Contribution mine("broadcast_string(root=" + std::to_string(root) + ")",
                      rank_ == root ? snapshot(data->data(), data->size()) : std::vector<char>());
    collective(std::move(mine), nullptr,
               [&](const std::vector<Contribution>& slots, const std::vector<char>&) {
                 if (rank_ != root) data->assign(slots[root].data.begin(), slots[root].data.end());
               });
    record(broadcast_traffic(sizeof(uint64_t), size(), rank_, root));
    record(broadcast_traffic(data->size(), size(), rank_, root));
  }

  void alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                 const std::vector<size_t>& recv_bytes) override {
    if (send_bytes.size() != static_cast<size_t>(size()) ||
        recv_bytes.size() != static_cast<size_t>(size())) {
      throw Error("alltoallv: send_bytes/recv_bytes need " + std::to_string(size()) +
                  " entries, got " + std::to_string(send_bytes.size()) + "/" +
                  std::to_string(recv_bytes.size()));
    }
    size_t send_total = 0, recv_total = 0;
    for (size_t b : send_bytes) send_total += b;
    for (size_t b : recv_bytes) recv_total += b;
    require_buffer(send, send_total, "alltoallv");
    require_buffer(recv, recv_total, "alltoallv");
    Contribution mine("alltoallv", snapshot(send, send_total), send_bytes, recv_bytes);
    collective(
        std::move(mine),
        [](const std::vector<Contribution>& slots, std::vector<char>*) {
          for (size_t s = 0; s < slots.size(); ++s) {
            for (size_t d = 0; d < slots.size(); ++d) {
              if (slots[s].send_bytes[d] != slots[d].recv_bytes[s]) {
                throw Error("alltoallv size mismatch: rank " + std::to_string(s) + " sends " +
                            std::to_string(slots[s].send_bytes[d]) + " bytes to rank " +
                            std::to_string(d) + ", which expects " +
                            std::to_string(slots[d].recv_bytes[s]));
              }
            }
          }
        },
        [&](const std::vector<Contribution>& slots, const std::vector<char>&) {
          char* out = static_cast<char*>(recv);
          for (const Contribution& slot : slots) {
            size_t offset = 0;
            for (int d = 0; d < rank_; ++d) offset += slot.send_bytes[d];
            const size_t bytes = slot.send_bytes[rank_];
            if (bytes > 0) std::memcpy(out, slot.data.data() + offset, bytes);
            out += bytes;
          }
        });
    record(alltoallv_traffic(send_bytes, recv_bytes, rank_));
  }

  void send(const void* buf, size_t bytes, int dst, int tag) override {
    check_rank(dst, "send");
    check_tag(tag);
    require_buffer(buf, bytes, "send");
    state_->post(rank_, dst, tag, snapshot(buf, bytes));
    record({bytes, 0});
  }

  void recv(void* buf, size_t bytes, int src, int tag) override {
    check_rank(src, "recv");
    check_tag(tag);
    require_buffer(buf, bytes, "recv");
    std::vector<char> message = state_->take(src, rank_, tag);
    if (message.size() != bytes) {
      throw Error("rank " + std::to_string(rank_) + " recv(src=" + std::to_string(src) +
                      ", tag=" + std::to_string(tag) + ") expected " + std::to_string(bytes) +
                      " bytes, message has " + std::to_string(message.size()),
                  StatusCode::kInternal);
    }
    if (bytes > 0) std::memcpy(buf, message.data(), bytes);
    record({0, bytes});
  }

  void sendrecv(const void* send_buf, size_t send_bytes, int dst, void* recv_buf, size_t recv_bytes,
                int src, int tag) override {
    send(send_buf, send_bytes, dst, tag);
    recv(recv_buf, recv_bytes, src, tag);
  }

  // Sends are buffered, so isend completes at once (counted at wait, like MPI). Receives are
  // matched at wait(): earlier-posted receives with the same source and tag are completed first,
  // so matching follows posting order as in MPI.
  P2pRequest isend(const void* buf, size_t bytes, int dst, int tag) override {
    check_rank(dst, "isend");
    check_tag(tag);
    require_buffer(buf, bytes, "isend");
    state_->post(rank_, dst, tag, snapshot(buf, bytes));
    return start(Transfer{true, nullptr, bytes, dst, tag});
  }

  P2pRequest irecv(void* buf, size_t bytes, int src, int tag) override {
    check_rank(src, "irecv");
    check_tag(tag);
    require_buffer(buf, bytes, "irecv");
    return start(Transfer{false, buf, bytes, src, tag});
  }

  void wait(P2pRequest* request) override {
    if (request == nullptr || !request->active()) return;
    auto it = transfers_.find(request->id);
    if (it == transfers_.end()) {
      throw Error("wait: request " + std::to_string(request->id) + " is not in flight");
    }
    *request = P2pRequest{};
    if (!it->second.send) {
      for (auto earlier = transfers_.begin(); earlier != it; ++earlier) {
        Transfer& t = earlier->second;
        if (!t.send && !t.matched && t.peer == it->second.peer && t.tag == it->second.tag) {
          match(&t);
        }
      }
      if (!it->second.matched) match(&it->second);
    }
    Transfer transfer = std::move(it->second);
    transfers_.erase(it);
    if (!transfer.error.empty()) throw Error(transfer.error, StatusCode::kInternal);
    record(transfer.send ? TrafficCounters{transfer.bytes, 0} : TrafficCounters{0, transfer.bytes});
  }

  void barrier() override {
    collective(Contribution{"barrier"}, nullptr, nullptr);
    ++calls_;
  }

  void abort(int code, const std::string& reason) override {
    state_->record_abort(rank_, code, reason);
  }

  std::vector<int> exchange_hosts() const override {
    std::vector<int> hosts;
    if (!hierarchical()) return hosts;
    for (int r = 0; r < size(); ++r) hosts.push_back(r / state_->ranks_per_host());
    return hosts;
  }

  // As MpiCommunicator's: the host's ranks summed in rank order into its first rank's buf.
  void reduce_within_host(float* buf, size_t count) override {
    if (!hierarchical()) Communicator::reduce_within_host(buf, count);
    const size_t bytes = count * sizeof(float);
    require_buffer(buf, bytes, "reduce_within_host");
    Contribution mine("reduce_within_host(count=" + std::to_string(count) + ")",
                      snapshot(buf, bytes));
    const int first = rank_ - local_rank();
    collective(std::move(mine), nullptr,
               [&](const std::vector<Contribution>& slots, const std::vector<char>&) {
                 if (local_rank() != 0) return;
                 for (int r = first + 1; r < first + local_size(); ++r) {
                   reduce_into(buf, slots[r].data.data(), count, ScalarType::kFloat32,
                               CollectiveOp::kSum);
                 }
               });
    record(reduce_to_first_traffic(bytes, local_size(), local_rank()));
  }

  TrafficCounters traffic() const override {
    return {bytes_sent_.load(), bytes_received_.load(), calls_.load()};
  }

  // Only the hosts and the hierarchy: the loopback world runs no algorithms and measures no link.
  CommunicationUsage communication_usage() const override {
    CommunicationUsage usage;
    usage.hosts = hosts();
    usage.hierarchical = hierarchical();
    return usage;
  }

 private:
  void collective(Contribution mine, const LoopbackState::Combine& combine,
                  const LoopbackState::Read& read) {
    static const LoopbackState::Combine kNoCombine = [](const std::vector<Contribution>&,
                                                        std::vector<char>*) {};
    static const LoopbackState::Read kNoRead = [](const std::vector<Contribution>&,
                                                  const std::vector<char>&) {};
    state_->collective(rank_, std::move(mine), combine ? combine : kNoCombine,
                       read ? read : kNoRead);
  }

  // Flat, or by host as MpiCommunicator does it where the job is hierarchical.
  TrafficCounters allgather_traffic(const std::vector<size_t>& block_bytes) const {
    size_t total = 0;
    for (size_t b : block_bytes) total += b;
    if (!hierarchical() || total == 0) return allgatherv_traffic(block_bytes, rank_);
    const int per_host = state_->ranks_per_host();
    std::vector<size_t> host_bytes(hosts(), 0);
    for (size_t r = 0; r < block_bytes.size(); ++r) host_bytes[r / per_host] += block_bytes[r];
    return allgatherv_by_host_traffic(block_bytes, host_bytes, rank_, rank_ / per_host,
                                      local_rank(), local_size());
  }

  int hosts() const {
    const int per_host = state_->ranks_per_host();
    return per_host > 0 ? (size() + per_host - 1) / per_host : 1;
  }

  // As MpiCommunicator::hierarchical(): several ranks on some host of a job across hosts.
  bool hierarchical() const {
    return state_->hierarchy() != Hierarchy::kOff && state_->ranks_per_host() > 1 && hosts() > 1;
  }

  void check_rank(int peer, const char* what) const {
    if (peer < 0 || peer >= size()) {
      throw Error(std::string(what) + ": rank " + std::to_string(peer) + " out of range [0, " +
                  std::to_string(size()) + ")");
    }
  }

  void check_tag(int tag) const {
    if (tag < 0) throw Error("tag " + std::to_string(tag) + " is negative");
  }

  void record(const TrafficCounters& delta) {
    bytes_sent_ += delta.bytes_sent;
    bytes_received_ += delta.bytes_received;
    ++calls_;
  }

  struct Transfer {
    bool send = false;
    void* buf = nullptr;  // receives
    size_t bytes = 0;
    int peer = 0;
    int tag = 0;
    bool matched = false;  // receive filled by an earlier wait
    std::string error;     // size mismatch found while matching, thrown by its own wait
  };

  P2pRequest start(Transfer transfer) {
    P2pRequest request{next_request_++};
    transfers_.emplace(request.id, std::move(transfer));
    return request;
  }

  void match(Transfer* t) {
    std::vector<char> message = state_->take(t->peer, rank_, t->tag);
    t->matched = true;
    if (message.size() != t->bytes) {
      t->error = "rank " + std::to_string(rank_) + " irecv(src=" + std::to_string(t->peer) +
                 ", tag=" + std::to_string(t->tag) + ") expected " + std::to_string(t->bytes) +
                 " bytes, message has " + std::to_string(message.size());
      return;
    }
    if (t->bytes > 0) std::memcpy(t->buf, message.data(), t->bytes);
  }

  std::shared_ptr<LoopbackState> state_;
  const int rank_;
  std::map<uint64_t, Transfer> transfers_;  // by P2pRequest::id, i.e. in posting order
  uint64_t next_request_ = 1;
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, calls_{0};
};

}  // namespace

LoopbackWorld::LoopbackWorld(int size, int ranks_per_host, std::chrono::milliseconds timeout)
    : LoopbackWorld(size, ranks_per_host, Hierarchy::kOff, timeout) {}

LoopbackWorld::LoopbackWorld(int size, int ranks_per_host, Hierarchy hierarchy,
                             std::chrono::milliseconds timeout) {
  if (size < 1) throw Error("LoopbackWorld: size must be >= 1, got " + std::to_string(size));
  if (ranks_per_host < 0) {
    throw Error("LoopbackWorld: ranks_per_host must be >= 0, got " +
                std::to_string(ranks_per_host));
  }
  if (timeout.count() <= 0) throw Error("LoopbackWorld: timeout must be positive");
  state_ = std::make_shared<LoopbackState>(size, ranks_per_host, timeout, hierarchy);
}

LoopbackWorld::~LoopbackWorld() = default;

int LoopbackWorld::size() const {
  return state_->size();
}

std::unique_ptr<Communicator> LoopbackWorld::communicator(int rank) {
  if (rank < 0 || rank >= size()) {
    throw Error("LoopbackWorld: rank " + std::to_string(rank) + " out of range [0, " +
                std::to_string(size()) + ")");
  }
  return std::make_unique<LoopbackCommunicator>(state_, rank);
}

void LoopbackWorld::fail(const std::string& reason) {
  state_->fail(reason);
}
bool LoopbackWorld::failed() const {
  return state_->failed();
}
std::string LoopbackWorld::failure_reason() const {
  return state_->failure_reason();
}
bool LoopbackWorld::aborted() const {
  return state_->aborted();
}
int LoopbackWorld::abort_code() const {
  return state_->abort_code();
}
std::string LoopbackWorld::abort_reason() const {
  return state_->abort_reason();
}

void run_ranks(LoopbackWorld& world, const std::function<void(Communicator&)>& body) {
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(world.size());
  for (int r = 0; r < world.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        std::unique_ptr<Communicator> comm = world.communicator(r);
        body(*comm);
      } catch (...) {
        std::string what = "unknown exception";
        try {
          throw;
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (!first) first = std::current_exception();
        }
        world.fail("rank " + std::to_string(r) + " threw: " + what);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

void run_ranks(int size, const std::function<void(Communicator&)>& body, int ranks_per_host) {
  LoopbackWorld world(size, ranks_per_host);
  run_ranks(world, body);
}

}  // namespace arcreduce
