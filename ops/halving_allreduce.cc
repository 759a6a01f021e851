#include "ops/halving_allreduce.h"

#include <algorithm>
#include <climits>
#include <string>

#include "arcreduce/status.h"
#include "ops/doubling_allreduce.h"
#include "ops/mpi_check.h"
#include "ops/reduce_kernels.h"

namespace arcreduce {

std::vector<HalvingSegment> halving_segments(size_t count, int index, int p) {
  std::vector<HalvingSegment> kept;
  HalvingSegment segment{0, count};
  for (int mask = 1; mask < p; mask *= 2) {
    const size_t mid = segment.begin + (segment.end - segment.begin) / 2;
    if ((index & mask) == 0) {
      segment.end = mid;
    } else {
      segment.begin = mid;
    }
    kept.push_back(segment);
  }
  return kept;
}

namespace {

// Sends `send_bytes` to `peer` and receives `recv_bytes` from it, each in pieces of at most
// `piece` bytes, all posted at once; an empty side posts nothing (both partners know both
// sizes, so they skip the same messages).
void exchange(MPI_Comm comm, int tag, const void* send, size_t send_bytes, void* recv,
              size_t recv_bytes, int peer, size_t piece, const WaitPolicy& wait,
              TrafficCounters* traffic, std::vector<MPI_Request>* requests) {
  requests->clear();
  char* in = static_cast<char*>(recv);
  for (size_t done = 0; done < recv_bytes; done += piece) {
    const int n = static_cast<int>(std::min(piece, recv_bytes - done));
    requests->push_back(MPI_REQUEST_NULL);
    ARC_MPI_CHECK(MPI_Irecv(in + done, n, MPI_BYTE, peer, tag, comm, &requests->back()));
  }
  const char* out = static_cast<const char*>(send);
  for (size_t done = 0; done < send_bytes; done += piece) {
    const int n = static_cast<int>(std::min(piece, send_bytes - done));
    requests->push_back(MPI_REQUEST_NULL);
    ARC_MPI_CHECK(MPI_Isend(out + done, n, MPI_BYTE, peer, tag, comm, &requests->back()));
  }
  traffic->bytes_received += recv_bytes;
  traffic->bytes_sent += send_bytes;
  if (requests->empty()) return;
  wait_requests(requests->data(), static_cast<int>(requests->size()), MPI_STATUSES_IGNORE, wait,
                std::min(piece, std::max(send_bytes, recv_bytes)));
}

// The half of `parent` that the partner at distance `mask` keeps while this rank keeps `mine`.
HalvingSegment other_half(HalvingSegment parent, HalvingSegment mine, int index, int mask) {
  return (index & mask) == 0 ? HalvingSegment{mine.end, parent.end}
                             : HalvingSegment{parent.begin, mine.begin};
}

}  // namespace

TrafficCounters halving_allreduce(MPI_Comm comm, int tag, void* buf, size_t count, ScalarType type,
                                  CollectiveOp op, size_t segment_bytes, std::vector<char>* scratch,
                                  const WaitPolicy& wait) {
  int rank = 0, size = 1;
  ARC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ARC_MPI_CHECK(MPI_Comm_size(comm, &size));
  TrafficCounters traffic;
  if (size == 1 || count == 0) return traffic;
  const size_t element = scalar_size(type);
  const size_t total = count * element;
  if (total > static_cast<size_t>(INT_MAX)) {
    throw Error("rabenseifner allreduce: " + std::to_string(total) +
                " bytes exceed one MPI message (INT_MAX)");
  }
  char* data = static_cast<char*>(buf);
  const size_t piece = std::clamp<size_t>(segment_bytes, 1, INT_MAX);
  std::vector<MPI_Request> requests;
  const DoublingPlan plan = doubling_plan(rank, size);
  if (plan.folded) {
    exchange(comm, tag, data, total, nullptr, 0, plan.fold_partner, piece, wait, &traffic,
             &requests);
    exchange(comm, tag, nullptr, 0, data, total, plan.fold_partner, piece, wait, &traffic,
             &requests);
    return traffic;
  }
  const size_t half = (count + 1) / 2 * element;
  if (scratch->size() < (plan.fold_partner >= 0 ? total : half)) {
    scratch->resize(plan.fold_partner >= 0 ? total : half);
  }
  if (plan.fold_partner >= 0) {
    exchange(comm, tag, nullptr, 0, scratch->data(), total, plan.fold_partner, piece, wait,
             &traffic, &requests);
    reduce_into(data, scratch->data(), count, type, op);
  }
  // plan.peers[k] is the partner at distance 2^k among the p exchanging ranks; this rank's
  // index among them is doubling_plan's.
  const int p = 1 << plan.peers.size();
  const int rem = size - p;
  const int index = rank < 2 * rem ? rank / 2 : rank - rem;
  const std::vector<HalvingSegment> kept = halving_segments(count, index, p);
  HalvingSegment parent{0, count};
  for (size_t round = 0; round < kept.size(); ++round) {
    const int peer = plan.peers[round];
    const HalvingSegment mine = kept[round];
    const HalvingSegment theirs = other_half(parent, mine, index, 1 << round);
    exchange(comm, tag, data + theirs.begin * element, (theirs.end - theirs.begin) * element,
             scratch->data(), (mine.end - mine.begin) * element, peer, piece, wait, &traffic,
             &requests);
    reduce_into(data + mine.begin * element, scratch->data(), mine.end - mine.begin, type, op);
    parent = mine;
  }
  // All-gather: unwind the rounds, handing the owned segment to the partner that gave it up.
  for (size_t round = kept.size(); round-- > 0;) {
    const int peer = plan.peers[round];
    const HalvingSegment mine = kept[round];
    const HalvingSegment whole = round == 0 ? HalvingSegment{0, count} : kept[round - 1];
    const HalvingSegment theirs = other_half(whole, mine, index, 1 << round);
    exchange(comm, tag, data + mine.begin * element, (mine.end - mine.begin) * element,
             data + theirs.begin * element, (theirs.end - theirs.begin) * element, peer, piece,
             wait, &traffic, &requests);
  }
  if (plan.fold_partner >= 0) {
    exchange(comm, tag, data, total, nullptr, 0, plan.fold_partner, piece, wait, &traffic,
             &requests);
  }
  return traffic;
}

}  // namespace arcreduce
