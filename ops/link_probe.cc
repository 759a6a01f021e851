#include "ops/link_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "ops/doubling_allreduce.h"
#include "ops/halving_allreduce.h"
#include "ops/mpi_check.h"
#include "ops/reduce_kernels.h"
#include "ops/ring_allreduce.h"

namespace arcreduce {
namespace {

using Seconds = std::chrono::duration<double>;

constexpr size_t kSmallBytes = 8;
constexpr int kLatencyRounds = 12;
constexpr size_t kFirstBulkBytes = size_t{64} << 10;
constexpr size_t kLastBulkBytes = size_t{4} << 20;
constexpr double kBulkSeconds = 0.02;
constexpr size_t kReduceBytes = size_t{1} << 20;
constexpr int kTinyRuns = 5;
constexpr size_t kTinyFloats = 2;
// The bulk message of the per-algorithm lines: what the ring moves in about this long at the
// rate measured first, within these bounds.
constexpr double kFitSeconds = 0.05;
constexpr size_t kFitMinBytes = size_t{64} << 10;
constexpr size_t kFitMaxBytes = size_t{16} << 20;

class RingShift {
 public:
  RingShift(MPI_Comm comm, int tag, const WaitPolicy& wait) : comm_(comm), tag_(tag), wait_(wait) {
    int rank = 0, size = 1;
    ARC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    ARC_MPI_CHECK(MPI_Comm_size(comm, &size));
    right_ = (rank + 1) % size;
    left_ = (rank + size - 1) % size;
  }

  // One round of `bytes` each way; its duration on this rank.
  double round(size_t bytes) {
    if (send_.size() < bytes) {
      send_.assign(bytes, 1);
      recv_.resize(bytes);
    }
    const auto start = std::chrono::steady_clock::now();
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    const int n = static_cast<int>(bytes);
    ARC_MPI_CHECK(MPI_Irecv(recv_.data(), n, MPI_BYTE, left_, tag_, comm_, &requests[0]));
    ARC_MPI_CHECK(MPI_Isend(send_.data(), n, MPI_BYTE, right_, tag_, comm_, &requests[1]));
    wait_requests(requests, 2, MPI_STATUSES_IGNORE, wait_, bytes);
    return Seconds(std::chrono::steady_clock::now() - start).count();
  }

 private:
  MPI_Comm comm_;
  int tag_;
  WaitPolicy wait_;
  int right_ = 0, left_ = 0;
  std::vector<char> send_, recv_;
};

// Agreement and barriers wait as the runtime does (non-blocking, sleeping): Open MPI's blocking
// calls poll, and on a host with a CPU budget that polling spends the budget the next timed
// message needs (a bulk ring then read twice its time).
double max_over_ranks(MPI_Comm comm, double value, const WaitPolicy& wait) {
  double result = value;
  MPI_Request request = MPI_REQUEST_NULL;
  ARC_MPI_CHECK(MPI_Iallreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, comm, &request));
  wait_request(&request, MPI_STATUS_IGNORE, wait);
  return result;
}

void barrier(MPI_Comm comm, const WaitPolicy& wait) {
  MPI_Request request = MPI_REQUEST_NULL;
  ARC_MPI_CHECK(MPI_Ibarrier(comm, &request));
  wait_request(&request, MPI_STATUS_IGNORE, wait);
}

double reduce_seconds_per_byte() {
  const size_t count = kReduceBytes / sizeof(float);
  std::vector<float> dst(count, 1.0f), src(count, 0.5f);
  double best = INFINITY;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    reduce_into(dst.data(), src.data(), count, ScalarType::kFloat32, CollectiveOp::kSum);
    best = std::min(best, Seconds(std::chrono::steady_clock::now() - start).count());
  }
  return best / static_cast<double>(kReduceBytes);
}

// One allreduce of `floats` by `algorithm` (ring, rabenseifner or doubling); its duration here.
double timed_allreduce(MPI_Comm comm, int tag, AllreduceAlgorithm algorithm, size_t floats,
                       size_t segment_bytes, const WaitPolicy& wait, std::vector<char>* scratch) {
  std::vector<float> data(floats, 1.0f);
  barrier(comm, wait);
  const auto start = std::chrono::steady_clock::now();
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      ring_allreduce(comm, data.data(), floats, ScalarType::kFloat32, CollectiveOp::kSum,
                     segment_bytes, scratch, wait);
      break;
    case AllreduceAlgorithm::kRabenseifner:
      halving_allreduce(comm, tag, data.data(), floats, ScalarType::kFloat32, CollectiveOp::kSum,
                        segment_bytes, scratch, wait);
      break;
    default:
      doubling_allreduce(comm, tag, data.data(), floats, ScalarType::kFloat32, CollectiveOp::kSum,
                         scratch, wait);
      break;
  }
  return Seconds(std::chrono::steady_clock::now() - start).count();
}

// The line t(B) = fixed + B per_byte of `algorithm` through a tiny message (the median of
// kTinyRuns) and one of `bulk_bytes`, each the slowest rank's.
AlgorithmCost fit_algorithm(MPI_Comm comm, int tag, AllreduceAlgorithm algorithm, size_t bulk_bytes,
                            size_t segment_bytes, const WaitPolicy& wait) {
  std::vector<char> scratch;
  timed_allreduce(comm, tag, algorithm, kTinyFloats, segment_bytes, wait, &scratch);  // connects
  std::vector<double> tiny(kTinyRuns);
  for (double& t : tiny) {
    t = timed_allreduce(comm, tag, algorithm, kTinyFloats, segment_bytes, wait, &scratch);
  }
  std::nth_element(tiny.begin(), tiny.begin() + kTinyRuns / 2, tiny.end());
  AlgorithmCost cost;
  cost.fixed_seconds = max_over_ranks(comm, tiny[kTinyRuns / 2], wait);
  // The better of two: the first bulk message on a connection also pays TCP's slow start.
  double bulk = INFINITY;
  for (int i = 0; i < 2; ++i) {
    bulk = std::min(bulk, timed_allreduce(comm, tag, algorithm, bulk_bytes / sizeof(float),
                                          segment_bytes, wait, &scratch));
  }
  bulk = max_over_ranks(comm, bulk, wait);
  cost.seconds_per_byte =
      std::max(bulk - cost.fixed_seconds, bulk / 10) / static_cast<double>(bulk_bytes);
  return cost;
}

bool usable(const AlgorithmCost& cost) {
  return std::isfinite(cost.fixed_seconds) && std::isfinite(cost.seconds_per_byte) &&
         cost.fixed_seconds > 0 && cost.seconds_per_byte > 0;
}

}  // namespace

LinkModel probe_link(MPI_Comm comm, int tag, size_t segment_bytes, const WaitPolicy& wait) {
  RingShift shift(comm, tag, wait);
  for (int i = 0; i < 3; ++i) shift.round(kSmallBytes);  // opens the connections
  shift.round(kFirstBulkBytes);
  std::vector<double> small(kLatencyRounds);
  for (double& seconds : small) seconds = shift.round(kSmallBytes);
  std::nth_element(small.begin(), small.begin() + kLatencyRounds / 2, small.end());
  LinkModel link;
  link.latency_seconds = max_over_ranks(comm, small[kLatencyRounds / 2], wait);
  size_t bytes = kFirstBulkBytes;
  double bulk = 0;
  for (;;) {
    bulk = max_over_ranks(comm, std::min(shift.round(bytes), shift.round(bytes)), wait);
    if (bulk >= kBulkSeconds || bytes >= kLastBulkBytes) break;
    bytes *= 4;
  }
  // A round of `bytes` costs one latency plus its bytes; never less than a tenth of the round,
  // so that a latency measured high cannot make the link look infinitely fast.
  const double transfer = std::max(bulk - link.latency_seconds, bulk / 10);
  link.seconds_per_byte = transfer / static_cast<double>(bytes);
  link.reduce_seconds_per_byte = max_over_ranks(comm, reduce_seconds_per_byte(), wait);
  link.measured = std::isfinite(link.latency_seconds) && std::isfinite(link.seconds_per_byte) &&
                  std::isfinite(link.reduce_seconds_per_byte) && link.latency_seconds > 0 &&
                  link.seconds_per_byte > 0 && link.reduce_seconds_per_byte > 0;
  if (!link.measured) return link;
  // The ring sends 2 (P - 1) / P of the message, about twice a shift round's bytes.
  const double fit = kFitSeconds / (2 * link.seconds_per_byte);
  const size_t bulk_bytes = std::clamp(static_cast<size_t>(fit), kFitMinBytes, kFitMaxBytes) /
                            sizeof(float) * sizeof(float);
  int size = 1;
  ARC_MPI_CHECK(MPI_Comm_size(comm, &size));
  link.ranks = size;
  link.ring = fit_algorithm(comm, tag, AllreduceAlgorithm::kRing, bulk_bytes, segment_bytes, wait);
  link.rabenseifner =
      fit_algorithm(comm, tag, AllreduceAlgorithm::kRabenseifner, bulk_bytes, segment_bytes, wait);
  link.doubling =
      fit_algorithm(comm, tag, AllreduceAlgorithm::kDoubling, bulk_bytes, segment_bytes, wait);
  // Every rank holds the same numbers (each the maximum over ranks), so every rank drops the
  // same lines.
  for (AlgorithmCost* cost : {&link.ring, &link.rabenseifner, &link.doubling}) {
    if (!usable(*cost)) *cost = AlgorithmCost{};
  }
  return link;
}

}  // namespace arcreduce
