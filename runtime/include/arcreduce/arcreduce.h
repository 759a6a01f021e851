// arcreduce public API. Thread-safety: every function may be called from any thread after
// init(); collectives run on one background coordinator thread per process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arcreduce/config.h"
#include "arcreduce/stats.h"
#include "arcreduce/status.h"
#include "arcreduce/types.h"

namespace arcreduce {

// Initialises MPI (if the application has not: then MPI is finalised at process exit),
// duplicates MPI_COMM_WORLD and starts the coordinator. Collective over MPI_COMM_WORLD.
// Throws Error on every rank if the configuration is invalid or differs across ranks.
void init();
void init(const Config& config);
// Completes pending ops with a kShutdown status and stops the coordinator. When any rank shuts
// down, every rank's pending ops complete with kShutdown. Idempotent.
void shutdown();
bool initialized();

// Throw Error when not initialised.
int rank();
int size();
int local_rank();
int local_size();

using Handle = uint64_t;

// Submits an in-place reduction of `tensor` under `name` (identical on all ranks, unique among
// this rank's in-flight ops). Floating-point dtypes only. Never throws: a bad tensor, a duplicate
// name or a runtime that is not running yields a handle that is already complete with an error
// Status (callback fired). A tensor refused here (bad dtype, shape, options) is refused on every
// rank: the other ranks' op of `name` fails with this rank's reason instead of waiting for it.
Handle allreduce_async(const std::string& name, Tensor tensor, AllreduceOptions options = {});
// True when the op is complete. Unknown handles count as complete.
bool poll(Handle handle);
// Blocks until the op completes, returns its Status and releases the handle. Handles are unique
// for the life of the process: after shutdown(); init(), a handle of the earlier runtime is
// unknown to the new one (kInvalidArgument), never another op's.
Status synchronize(Handle handle);
Status allreduce(const std::string& name, Tensor tensor, AllreduceOptions options = {});

// Submits an in-place broadcast of `tensor` from `root_rank`: once the op completes, every rank's
// tensor holds root_rank's bytes. Negotiated like allreduce_async (same name rules, same handles):
// every rank must submit `name` with the same dtype, shape, device kind and root_rank, else every
// rank's op fails with kMismatch naming the field and the ranks; a root_rank that is not a rank of
// the job fails everywhere with kInvalidArgument. Accepts every DType (broadcast moves bytes).
// Never throws. Broadcasts share buckets only with broadcasts from the same root; each tensor is
// sent from its own memory, without staging copies.
Handle broadcast_async(const std::string& name, Tensor tensor, int root_rank,
                       BroadcastOptions options = {});
Status broadcast(const std::string& name, Tensor tensor, int root_rank,
                 BroadcastOptions options = {});

// Collectives whose output is shaped by every rank's input, negotiated like allreduce (same name
// rules, handles and refusals), never compressed, fused or cached, CPU tensors only. The output
// goes to memory from options.allocate (see OutputAllocator); the input is only read.
// allgather: every rank's tensor, concatenated along the first dimension in rank order; the first
// dimension may differ across ranks, the other dimensions and the dtype must agree.
Handle allgather_async(const std::string& name, Tensor tensor, CollectiveOptions options);
// alltoall: rank r's rows [sum(splits[:j]), +splits[j]) go to rank j; each rank's output holds
// what it received, in rank order (rows per sender: the allocator's `rows`).
Handle alltoall_async(const std::string& name, Tensor tensor, CollectiveOptions options);
// reducescatter: the reduction (options.op) of every rank's tensor (same shape everywhere), of
// which rank r keeps its block of the first dimension: n / size() rows, one more for the first
// n % size() ranks.
Handle reducescatter_async(const std::string& name, Tensor tensor, CollectiveOptions options);

// For a rank that has run out of work (an uneven last batch, say): blocks until every rank has
// called join() and returns the rank that called it last, the same on every rank. Meanwhile this
// rank takes part in the other ranks' allreduces with zeros (an average still divides by
// size()); their other collectives fail with kInvalidArgument naming the joined ranks. As
// Horovod's join. Throws Error if the runtime stops first. Not for CUDA allreduces.
int join();

// For bindings that refuse an op before it reaches the runtime (an input the binding cannot
// express): this rank will not submit `name`, and the other ranks' op of that name fails with
// kInvalidArgument and `reason` instead of waiting for it. Returns a handle already complete with
// that error. Sends nothing when `name` is empty or in flight on this rank. Never throws.
Handle refuse(const std::string& name, const std::string& reason, int process_set = 0);

// Process sets, as Horovod's: collectives among a subset of the ranks, chosen per op by the
// options' process_set. Set 0 is every rank of the job. Each set has a runtime of its own (its
// own coordinator thread, negotiation, fusion, cache and compressor state) over a communicator
// of its ranks, so the sets' ops never wait for one another; a set's ranks are numbered by their
// order in the job (root_rank stays a rank of the job). Needs MPI_THREAD_MULTIPLE.
//
// add_process_set: collective over every rank of the job (each passes the same ranks, in the
// same order of calls); returns the new set's id, the same on every rank. Throws Error on every
// rank for an empty list, a rank outside the job, a rank listed twice, ranks that differ across
// ranks, or the ranks of an existing set (its id is named).
int add_process_set(std::vector<int> ranks);
// Removes a set on this rank; call it on every rank, as Horovod. The set's pending ops fail with
// kShutdown; its ops submitted afterwards fail with kInvalidArgument. Throws Error for set 0 or
// an unknown id.
void remove_process_set(int process_set);
// The set's ranks (ascending), and this rank's index among them (-1 when not a member). Throw
// Error for an unknown id.
std::vector<int> process_set_ranks(int process_set);
int process_set_rank(int process_set);
// The ids of the sets in use, 0 first.
std::vector<int> process_set_ids();
// A set's counters on this rank (zeros where this rank is not a member); stats() is set 0's.
Stats stats(int process_set);

// Snapshot of this rank's counters (zeros before init).
Stats stats();

// Writes / reads all compressor state of this rank (error-feedback buffers, per-tensor step
// counters) so that a resumed job continues exactly where it stopped. Call between steps, when
// no op is in flight, on every rank with a per-rank path. load_state rejects files of another
// rank, world size or version, corrupted files, and (at the first use) other tensor sets.
// Throw Error on failure.
void save_state(const std::string& path);
void load_state(const std::string& path);

}  // namespace arcreduce
