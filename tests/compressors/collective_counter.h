// A communicator that counts the collectives a compressor issues and forwards them.
#pragma once

#include <string>
#include <vector>

#include "ops/communicator.h"

namespace arcreduce {
namespace testing {

// Counts the collectives a compressor issues (and forwards them).
class CollectiveCounter : public Communicator {
 public:
  explicit CollectiveCounter(Communicator& inner) : inner_(inner) {}
  int allreduces = 0, others = 0;
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int local_rank() const override { return inner_.local_rank(); }
  int local_size() const override { return inner_.local_size(); }
  void allreduce(void* b, size_t c, ScalarType t, CollectiveOp o) override {
    ++allreduces;
    inner_.allreduce(b, c, t, o);
  }
  void allgather(const void* s, size_t b, void* r) override {
    ++others;
    inner_.allgather(s, b, r);
  }
  void allgatherv(const void* s, void* r, const std::vector<size_t>& b) override {
    ++others;
    inner_.allgatherv(s, r, b);
  }
  void gatherv(const std::string& s, std::vector<std::string>* b, int root) override {
    ++others;
    inner_.gatherv(s, b, root);
  }
  void broadcast(void* b, size_t n, int root) override {
    ++others;
    inner_.broadcast(b, n, root);
  }
  void broadcast(std::string* d, int root) override {
    ++others;
    inner_.broadcast(d, root);
  }
  void alltoallv(const void* s, const std::vector<size_t>& sb, void* r,
                 const std::vector<size_t>& rb) override {
    ++others;
    inner_.alltoallv(s, sb, r, rb);
  }
  void send(const void* b, size_t n, int d, int t) override {
    ++others;
    inner_.send(b, n, d, t);
  }
  void recv(void* b, size_t n, int s, int t) override {
    ++others;
    inner_.recv(b, n, s, t);
  }
  void sendrecv(const void* sb, size_t sn, int d, void* rb, size_t rn, int s, int t) override {
    ++others;
    inner_.sendrecv(sb, sn, d, rb, rn, s, t);
  }
  P2pRequest isend(const void* b, size_t n, int d, int t) override {
    ++others;
    return inner_.isend(b, n, d, t);
  }
  P2pRequest irecv(void* b, size_t n, int s, int t) override {
    ++others;
    return inner_.irecv(b, n, s, t);
  }
  void wait(P2pRequest* r) override { inner_.wait(r); }
  void barrier() override {
    ++others;
    inner_.barrier();
  }
  void abort(int c, const std::string& r) override { inner_.abort(c, r); }
  TrafficCounters traffic() const override { return inner_.traffic(); }

 private:
  Communicator& inner_;
};

}  // namespace testing
}  // namespace arcreduce
