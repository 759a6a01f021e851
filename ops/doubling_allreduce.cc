#include "ops/doubling_allreduce.h"

#include <climits>
#include <string>

#include "arcreduce/status.h"
#include "ops/mpi_check.h"
#include "ops/reduce_kernels.h"

namespace arcreduce {

DoublingPlan doubling_plan(int rank, int size) {
  DoublingPlan plan;
  int p2 = 1;
  while (p2 * 2 <= size) p2 *= 2;
  const int rem = size - p2;
  // The first 2 rem ranks pair up: the even one hands its data to the odd one and waits.
  int index = -1;  // this rank's place among the p2 that exchange
  if (rank < 2 * rem) {
    if (rank % 2 == 0) {
      plan.folded = true;
      plan.fold_partner = rank + 1;
      return plan;
    }
    plan.fold_partner = rank - 1;
    index = rank / 2;
  } else {
    index = rank - rem;
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int other = index ^ mask;
    plan.peers.push_back(other < rem ? 2 * other + 1 : other + rem);
  }
  return plan;
}

namespace {

void exchange(MPI_Comm comm, int tag, const void* send, void* recv, int bytes, int peer,
              const WaitPolicy& wait, TrafficCounters* traffic) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (recv) {
    ARC_MPI_CHECK(MPI_Irecv(recv, bytes, MPI_BYTE, peer, tag, comm, &requests[0]));
    traffic->bytes_received += static_cast<size_t>(bytes);
  }
  if (send) {
    ARC_MPI_CHECK(MPI_Isend(send, bytes, MPI_BYTE, peer, tag, comm, &requests[1]));
    traffic->bytes_sent += static_cast<size_t>(bytes);
  }
  wait_requests(requests, 2, MPI_STATUSES_IGNORE, wait, static_cast<size_t>(bytes));
}

}  // namespace

TrafficCounters doubling_allreduce(MPI_Comm comm, int tag, void* buf, size_t count, ScalarType type,
                                   CollectiveOp op, std::vector<char>* scratch,
                                   const WaitPolicy& wait) {
  int rank = 0, size = 1;
  ARC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ARC_MPI_CHECK(MPI_Comm_size(comm, &size));
  TrafficCounters traffic;
  if (size == 1 || count == 0) return traffic;
  const size_t total = count * scalar_size(type);
  if (total > static_cast<size_t>(INT_MAX)) {
    throw Error("doubling allreduce: " + std::to_string(total) +
                " bytes exceed one MPI message (INT_MAX)");
  }
  const int bytes = static_cast<int>(total);
  if (scratch->size() < total) scratch->resize(total);
  const DoublingPlan plan = doubling_plan(rank, size);
  if (plan.folded) {
    exchange(comm, tag, buf, nullptr, bytes, plan.fold_partner, wait, &traffic);
    exchange(comm, tag, nullptr, buf, bytes, plan.fold_partner, wait, &traffic);
    return traffic;
  }
  if (plan.fold_partner >= 0) {
    exchange(comm, tag, nullptr, scratch->data(), bytes, plan.fold_partner, wait, &traffic);
    reduce_into(buf, scratch->data(), count, type, op);
  }
  for (int peer : plan.peers) {
    exchange(comm, tag, buf, scratch->data(), bytes, peer, wait, &traffic);
    reduce_into(buf, scratch->data(), count, type, op);
  }
  if (plan.fold_partner >= 0) {
    exchange(comm, tag, buf, nullptr, bytes, plan.fold_partner, wait, &traffic);
  }
  return traffic;
}

}  // namespace arcreduce
