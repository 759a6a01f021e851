#include "ops/ring_allreduce.h"

#include <algorithm>
#include <climits>

#include "ops/mpi_check.h"
#include "ops/reduce_kernels.h"
#include "ops/traffic_estimates.h"

namespace arcreduce {
namespace {

constexpr int kRingTag = 0;

// One allreduce: 2(P-1) steps; step t sends chunk (rank - t) to the right neighbour and receives
// chunk (rank - t - 1) from the left one. Steps t < P-1 reduce the received data into buf
// (reduce-scatter); later steps receive straight into buf (all-gather). What a step receives is
// what the next step sends, so each segment is forwarded as soon as it is reduced/received.
class Ring {
 public:
  Ring(MPI_Comm comm, int rank, int size, char* data, size_t count, ScalarType type,
       CollectiveOp op, size_t segment_bytes, std::vector<char>* scratch, const WaitPolicy& wait)
      : comm_(comm),
        rank_(rank),
        size_(size),
        data_(data),
        count_(count),
        type_(type),
        op_(op),
        element_(scalar_size(type)),
        segment_elements_(std::max<size_t>(1, segment_bytes / element_)),
        chunk_capacity_(ring_chunk(count, size, 0).count),
        steps_(2 * (size - 1)),
        scratch_(scratch),
        wait_(wait),
        send_wait_(wait) {
    send_wait_.seconds_per_byte = 0;  // sends move as this rank polls: no least length
    if (scratch_->size() < 2 * chunk_capacity_ * element_) {
      scratch_->resize(2 * chunk_capacity_ * element_);
    }
  }

  TrafficCounters run() {
    post_receives(0);
    sends_[0].assign(segments(send_chunk(0)), MPI_REQUEST_NULL);
    for (size_t k = 0; k < sends_[0].size(); ++k) post_send(0, k);
    for (int t = 0; t < steps_; ++t) {
      // With two ranks, step t+1 receives into the chunk step t is still sending; wait first.
      const bool next = t + 1 < steps_;
      const bool defer = next && size_ == 2 && t + 1 >= size_ - 1;
      if (next && !defer) post_receives(t + 1);
      if (next) sends_[(t + 1) % 2].assign(segments(send_chunk(t + 1)), MPI_REQUEST_NULL);
      const RingChunk chunk = recv_chunk(t);
      std::vector<MPI_Request>& receives = receives_[t % 2];
      for (size_t k = 0; k < receives.size(); ++k) {
        const size_t offset = k * segment_elements_;
        const size_t length = std::min(segment_elements_, chunk.count - offset);
        wait_request(&receives[k], MPI_STATUS_IGNORE, wait_, length * element_);
        if (t < size_ - 1) {
          reduce_into(data_ + (chunk.offset + offset) * element_, scratch_at(t, offset), length,
                      type_, op_);
        }
        if (next) post_send(t + 1, k);
      }
      std::vector<MPI_Request>& sends = sends_[t % 2];
      if (!sends.empty()) {
        wait_requests(sends.data(), static_cast<int>(sends.size()), MPI_STATUSES_IGNORE, send_wait_,
                      segment_elements_ * element_ * sends.size());
      }
      if (defer) post_receives(t + 1);
    }
    return traffic_;
  }

 private:
  RingChunk chunk_at(int index) const {
    return ring_chunk(count_, size_, ((index % size_) + size_) % size_);
  }
  RingChunk send_chunk(int t) const { return chunk_at(rank_ - t); }
  RingChunk recv_chunk(int t) const { return chunk_at(rank_ - t - 1); }
  size_t segments(const RingChunk& chunk) const {
    return (chunk.count + segment_elements_ - 1) / segment_elements_;
  }
  char* scratch_at(int t, size_t offset) {
    return scratch_->data() + ((t % 2) * chunk_capacity_ + offset) * element_;
  }

  void post_receives(int t) {
    const RingChunk chunk = recv_chunk(t);
    std::vector<MPI_Request>& receives = receives_[t % 2];
    receives.assign(segments(chunk), MPI_REQUEST_NULL);
    const int left = (rank_ - 1 + size_) % size_;
    for (size_t k = 0; k < receives.size(); ++k) {
      const size_t offset = k * segment_elements_;
      const size_t length = std::min(segment_elements_, chunk.count - offset);
      char* target =
          t < size_ - 1 ? scratch_at(t, offset) : data_ + (chunk.offset + offset) * element_;
      ARC_MPI_CHECK(MPI_Irecv(target, static_cast<int>(length * element_), MPI_BYTE, left, kRingTag,
                              comm_, &receives[k]));
      traffic_.bytes_received += length * element_;
    }
  }

  void post_send(int t, size_t k) {
    const RingChunk chunk = send_chunk(t);
    const size_t offset = k * segment_elements_;
    const size_t length = std::min(segment_elements_, chunk.count - offset);
    const int right = (rank_ + 1) % size_;
    ARC_MPI_CHECK(MPI_Isend(data_ + (chunk.offset + offset) * element_,
                            static_cast<int>(length * element_), MPI_BYTE, right, kRingTag, comm_,
                            &sends_[t % 2][k]));
    traffic_.bytes_sent += length * element_;
  }

  MPI_Comm comm_;
  int rank_, size_;
  char* data_;
  size_t count_;
  ScalarType type_;
  CollectiveOp op_;
  size_t element_, segment_elements_, chunk_capacity_;
  int steps_;
  std::vector<char>* scratch_;
  WaitPolicy wait_, send_wait_;
  std::vector<MPI_Request> receives_[2], sends_[2];
  TrafficCounters traffic_;
};

}  // namespace

TrafficCounters ring_allreduce(MPI_Comm comm, void* buf, size_t count, ScalarType type,
                               CollectiveOp op, size_t segment_bytes, std::vector<char>* scratch,
                               const WaitPolicy& wait) {
  int rank = 0, size = 1;
  ARC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ARC_MPI_CHECK(MPI_Comm_size(comm, &size));
  if (size == 1 || count == 0) return {};
  segment_bytes = std::min<size_t>(std::max<size_t>(segment_bytes, 1), INT_MAX);
  return Ring(comm, rank, size, static_cast<char*>(buf), count, type, op, segment_bytes, scratch,
              wait)
      .run();
}

}  // namespace arcreduce
