// Process sets (Horovod's): collectives among a subset of the job's ranks. Each set that a rank
// belongs to has a Runtime of its own over a communicator of the set's ranks, with its own
// coordinator thread, negotiation, fusion, cache and compressor state, so the ops of different
// sets never wait for one another. The process-wide API (api.cc) keeps the table under its mutex;
// what is here is the part that does not depend on that state.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "arcreduce/arcreduce.h"

namespace arcreduce {

class Runtime;

// The API's handles: bit 63 marks a handle completed without reaching a runtime (api.cc), bits
// 48-62 the process set whose runtime holds it (0: the global one), the rest the TensorQueue's
// process-wide counter, which never gets near 2^48.
constexpr int kProcessSetShift = 48;
constexpr Handle kQueueHandleMask = (Handle{1} << kProcessSetShift) - 1;
constexpr int kMaxProcessSetId = (1 << 15) - 1;

inline Handle tag_handle(Handle queue_handle, int process_set) {
  return (static_cast<Handle>(process_set) << kProcessSetShift) | queue_handle;
}
inline int process_set_of(Handle handle) {
  return static_cast<int>((handle >> kProcessSetShift) & kMaxProcessSetId);
}
inline Handle queue_handle_of(Handle handle) {
  return handle & kQueueHandleMask;
}

// "[0, 2, 5]".
std::string ranks_string(const std::vector<int>& ranks);
// The set's rank of `global_rank` (its index among the ascending ranks), -1 when not a member.
int rank_in_set(const std::vector<int>& ranks, int global_rank);
// Empty when `ranks` (ascending) is a valid process set of a job of `world_size` ranks, else why
// not: empty, a rank outside [0, world_size), a rank twice.
std::string check_process_set_ranks(const std::vector<int>& ranks, int world_size);
// A timeline path for a process set's runtime, beside the job's: "t.json" -> "t.set3.json".
std::string process_set_timeline(const std::string& path, int id);

// Collective over `comm`: throws Error on every rank when any rank's `error` is not empty or the
// ranks' `ranks` differ (naming the ranks that differ from rank 0, or the first error and its
// rank); returns normally on every rank otherwise. `what` names the call in the message.
void agree_on_process_set(MPI_Comm comm, const std::vector<int>& ranks, const std::string& error,
                          const std::string& what);

struct ProcessSetEntry {
  std::vector<int> ranks;            // global ranks, ascending
  std::shared_ptr<Runtime> runtime;  // null on ranks outside the set
};

}  // namespace arcreduce
