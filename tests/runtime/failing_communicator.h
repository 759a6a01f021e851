// A Communicator that forwards every call to another one and, once armed, throws an ordinary
// arcreduce::Error (not a CommunicationTimeout) from the next allreduce() on this rank only: a
// one-sided failure of one rank's coordinator, as an error raised on the receiving side of a
// collective, an allocation failure or a device fault would be. The other ranks are left inside
// that collective. Used over the loopback world (tests/runtime) and over MPI (tests/mpi).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arcreduce/status.h"
#include "ops/communicator.h"

namespace arcreduce {
namespace testing {

class FailingCommunicator : public Communicator {
 public:
  // `arm` is read before every allreduce: once true, that allreduce throws `message`.
  FailingCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<std::atomic<bool>> arm,
                      std::string message)
      : inner_(std::move(inner)), arm_(std::move(arm)), message_(std::move(message)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  void allreduce(void* buf, size_t count, ScalarType type, CollectiveOp op) override {
    if (arm_->load()) throw Error(message_, StatusCode::kInternal);
    inner_->allreduce(buf, count, type, op);
  }
  void allgather(const void* send, size_t bytes, void* recv) override {
    inner_->allgather(send, bytes, recv);
  }
  void allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_bytes) override {
    inner_->allgatherv(send, recv, recv_bytes);
  }
  void gatherv(const std::string& send, std::vector<std::string>* blocks, int root) override {
    inner_->gatherv(send, blocks, root);
  }
  void broadcast(void* buf, size_t bytes, int root) override {
    inner_->broadcast(buf, bytes, root);
  }
  void broadcast(std::string* data, int root) override { inner_->broadcast(data, root); }
  void alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                 const std::vector<size_t>& recv_bytes) override {
    inner_->alltoallv(send, send_bytes, recv, recv_bytes);
  }
  void send(const void* buf, size_t bytes, int dst, int tag) override {
    inner_->send(buf, bytes, dst, tag);
  }
  void recv(void* buf, size_t bytes, int src, int tag) override {
    inner_->recv(buf, bytes, src, tag);
  }
  void sendrecv(const void* send_buf, size_t send_bytes, int dst, void* recv_buf, size_t recv_bytes,
                int src, int tag) override {
    inner_->sendrecv(send_buf, send_bytes, dst, recv_buf, recv_bytes, src, tag);
  }
  P2pRequest isend(const void* buf, size_t bytes, int dst, int tag) override {
    return inner_->isend(buf, bytes, dst, tag);
  }
  P2pRequest irecv(void* buf, size_t bytes, int src, int tag) override {
    return inner_->irecv(buf, bytes, src, tag);
  }
  void wait(P2pRequest* request) override { inner_->wait(request); }
  void barrier() override { inner_->barrier(); }
  void abort(int code, const std::string& reason) override { inner_->abort(code, reason); }
  bool find_silent_ranks(std::chrono::milliseconds grace, std::vector<int>* silent) override {
    return inner_->find_silent_ranks(grace, silent);
  }
  std::vector<int> exchange_hosts() const override { return inner_->exchange_hosts(); }
  void reduce_within_host(float* buf, size_t count) override {
    inner_->reduce_within_host(buf, count);
  }
  TrafficCounters traffic() const override { return inner_->traffic(); }
  CommunicationUsage communication_usage() const override { return inner_->communication_usage(); }
  bool allreduce_accepts_device_memory(ScalarType type, size_t count) const override {
    return inner_->allreduce_accepts_device_memory(type, count);
  }

 private:
  std::unique_ptr<Communicator> inner_;
  std::shared_ptr<std::atomic<bool>> arm_;
  std::string message_;
};

}  // namespace testing
}  // namespace arcreduce
