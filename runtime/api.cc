// The process-wide API: one Runtime over MPI_COMM_WORLD, created by init(), and one per process
// set this rank belongs to (runtime/process_sets.h).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "arcreduce/arcreduce.h"
#include "ops/allreduce_algorithm.h"
#include "ops/mpi_communicator.h"
#include "runtime/config_agreement.h"
#include "runtime/mpi_environment.h"
#include "runtime/process_sets.h"
#include "runtime/runtime.h"

namespace arcreduce {
namespace {

WaitPolicy wait_policy_of(const Config& config) {
  WaitPolicy policy;
  policy.mode = parse_wait_mode(config.wait_mode);
  policy.max_sleep = std::chrono::microseconds(std::max<int64_t>(1, config.wait_max_sleep_us));
  policy.min_sleep = std::min(policy.min_sleep, policy.max_sleep);
  policy.spin = std::chrono::microseconds(std::max<int64_t>(0, config.wait_spin_us));
  policy.history = std::make_shared<WaitHistory>();  // one per runtime, shared by its waits
  // A collective without progress for the stall shutdown time means a rank stopped taking part
  // (stopped, hung, cut off): the coordinator then names it and ends the job (docs/errors.md).
  if (config.stall_shutdown_seconds > 0) {
    policy.timeout = std::chrono::milliseconds(
        static_cast<int64_t>(std::ceil(std::min(config.stall_shutdown_seconds, 1e9) * 1000.0)));
  }
  return policy;
}

// Throws Error when the configuration names an unknown algorithm or wait mode.
MpiCommunicatorOptions communicator_options(const Config& config) {
  MpiCommunicatorOptions options;
  options.algorithm = parse_allreduce_algorithm(config.allreduce_algorithm);
  options.hierarchy = parse_hierarchy(config.hierarchical, "ARCREDUCE_HIERARCHICAL");
  options.wait = wait_policy_of(config);
  return options;
}

// Lock rules (docs/cpp-api.md, "Threads"):
//   g_lifecycle_mutex serialises the calls that change which runtimes exist or make blocking MPI
//     calls on the caller's thread: init(), shutdown(), add_process_set(), remove_process_set()
//     and the exit handler. It is held across their MPI calls and coordinator joins, so it is
//     never taken on a coordinator thread (callbacks run there: those calls made from a callback
//     only request, or fail with an Error), and never taken while g_mutex is held.
//   g_mutex guards the state below (the current runtime, the process sets, the parked runtimes,
//     the next set id, the orphan queue). It is held only to read or swap that state: never
//     across a join, a wait for an op, or an MPI call, so a callback may call any function that
//     takes it while another thread shuts a runtime down or initialises a new one.
std::mutex g_lifecycle_mutex;
std::mutex g_mutex;
// The current runtime, replaced only by init() and torn down by the exit handler. Calls that use
// it after releasing g_mutex (submissions, synchronize()) hold a reference, so a runtime that
// another thread replaces or tears down meanwhile stays alive until the last such call returns.
// Never destroyed by static destruction: the atexit handler tears the runtime down before
// MPI_Finalize.
std::shared_ptr<Runtime>& current_runtime() {
  static auto* runtime = new std::shared_ptr<Runtime>();
  return *runtime;
}
// Runtimes still used by a call when they were retired (see retire()): kept alive for good.
std::vector<std::shared_ptr<Runtime>>& parked_runtimes() {
  static auto* parked = new std::vector<std::shared_ptr<Runtime>>();
  return *parked;
}
// The process sets other than set 0, by id, under g_mutex; ids are never reused.
std::map<int, ProcessSetEntry>& process_sets() {
  static auto* sets = new std::map<int, ProcessSetEntry>();
  return *sets;
}
int g_next_process_set_id = 1;
// MPI_COMM_WORLD's duplicate for add_process_set's own collectives (its agreement and split),
// made by the first call; the runtimes' communicators are duplicates of their own.
MPI_Comm g_process_set_comm = MPI_COMM_NULL;
bool g_we_initialized_mpi = false;
// Handles of calls made while no runtime exists; the top bit keeps them apart from a runtime's.
TensorQueue* g_orphan_queue = nullptr;
constexpr Handle kOrphanBit = 1ull << 63;
// How long retire() waits for the calls still using a retired runtime.
constexpr std::chrono::seconds kRetireWait(10);

// Destroys `old`, a runtime that is no longer current (no longer reachable through the state),
// once the calls still using it have returned. It is shut down first so that they return
// promptly: its pending ops complete with kShutdown and new submissions are rejected. Called
// with g_lifecycle_mutex held and g_mutex free (its callbacks may take g_mutex while it is
// joined), on the thread of init(), remove_process_set() or the exit handler, before any new
// runtime starts: its communicator is freed while no coordinator thread makes MPI calls, as
// MPI_THREAD_SERIALIZED requires.
// A call that does not return in time (a callback that blocks, or one that calls init() itself)
// keeps the runtime alive for the rest of the process rather than have it freed under its feet.
void park(std::shared_ptr<Runtime> runtime) {
  std::lock_guard<std::mutex> lock(g_mutex);
  parked_runtimes().push_back(std::move(runtime));
}

void retire(std::shared_ptr<Runtime> old) {
  if (!old) return;
  old->shutdown();
  const auto deadline = std::chrono::steady_clock::now() + kRetireWait;
  while (old.use_count() > 1) {
    if (std::chrono::steady_clock::now() > deadline) {
      spdlog::warn(
          "arcreduce: a call into the previous runtime has not returned after {} s; keeping "
          "that runtime alive",
          kRetireWait.count());
      park(std::move(old));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  old.reset();  // the last reference: the runtime is destroyed here
}

// Takes every runtime out of the state (the process sets' first, then the current one) and
// retires them: init() after shutdown(), the exit handler. g_lifecycle_mutex held.
void retire_all() {
  std::map<int, ProcessSetEntry> sets;
  std::shared_ptr<Runtime> current;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    sets.swap(process_sets());
    current = std::move(current_runtime());
  }
  for (auto& [id, entry] : sets) retire(std::move(entry.runtime));
  retire(std::move(current));
}

void finalize_at_exit() {
  std::lock_guard<std::mutex> life(g_lifecycle_mutex);
  retire_all();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_process_set_comm != MPI_COMM_NULL) MPI_Comm_free(&g_process_set_comm);
  if (g_we_initialized_mpi) MPI_Finalize();
}

void ensure_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw Error("arcreduce::init(): MPI was already finalized in this process");
  int provided = 0;
  if (!initialized) {
    if (apply_mpi_environment_defaults()) {
      spdlog::debug("arcreduce: {}={} (docs/design/runtime.md)", kEnvTcpEagerLimit,
                    kTcpEagerLimitBytes);
    }
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw Error("arcreduce::init(): MPI_Init_thread failed", StatusCode::kInternal);
    }
    g_we_initialized_mpi = true;
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    throw Error("arcreduce::init(): MPI provides thread level " + std::to_string(provided) +
                "; arcreduce's coordinator thread needs MPI_THREAD_SERIALIZED or "
                "MPI_THREAD_MULTIPLE (initialise MPI with MPI_Init_thread)");
  }
}

bool runtime_running() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return current_runtime() && current_runtime()->running();
}

// init() and init(config), with g_lifecycle_mutex held and g_mutex free.
void init_locked(const Config* config) {
  if (runtime_running()) return;  // init() twice is harmless, as in Horovod
  ensure_mpi();
  std::optional<Config> parsed;
  std::string error;
  if (config) {
    parsed = *config;
  } else {
    try {
      parsed = Config::from_env();
    } catch (const Error& e) {
      error = e.what();
    }
  }
  MpiCommunicatorOptions options;
  if (parsed) {
    try {
      options = communicator_options(*parsed);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  // The old runtime and its sets (sets belong to the runtime they were added to) are freed
  // before the new communicator exists: freeing them after the new coordinator started would put
  // two threads in MPI at once.
  retire_all();
  auto comm = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, options);
  if (!error.empty()) agree_on_config(*comm, nullptr, error);  // throws on every rank
  auto runtime = std::make_shared<Runtime>(*parsed, std::move(comm));
  std::lock_guard<std::mutex> lock(g_mutex);
  current_runtime() = std::move(runtime);
}

// Whether the caller is a completion callback or a coordinator thread. A callback runs on a
// coordinator thread, or at once on the submitting thread when its op is rejected (submitted to a
// runtime that has stopped): both must not replace the runtime that the submission they run
// inside still uses, nor wait for a coordinator.
bool in_callback() {
  return Coordinator::on_any_coordinator_thread() || in_completion_callback();
}

// For the calls that must not run in a callback (they join coordinators, make blocking MPI
// calls or replace the runtime): an Error naming the call.
void refuse_on_coordinator_thread(const std::string& what) {
  if (!in_callback()) return;
  throw Error("arcreduce::" + what +
                  "() was called from a completion callback, where it would wait for a "
                  "coordinator thread, make MPI calls beside one or replace the runtime that "
                  "the callback's op came from; call it from your own thread, outside callbacks",
              StatusCode::kInvalidArgument);
}

Runtime& running_runtime(const char* what) {
  const std::shared_ptr<Runtime>& runtime = current_runtime();
  if (!runtime) {
    throw Error(std::string("arcreduce::") + what +
                    "(): arcreduce is not initialised; call "
                    "arcreduce::init() first",
                StatusCode::kShutdown);
  }
  return *runtime;
}

}  // namespace

void init() {
  if (in_callback() && runtime_running()) return;
  refuse_on_coordinator_thread("init");
  std::lock_guard<std::mutex> life(g_lifecycle_mutex);
  init_locked(nullptr);
}

void init(const Config& config) {
  if (in_callback() && runtime_running()) return;
  refuse_on_coordinator_thread("init");
  std::lock_guard<std::mutex> life(g_lifecycle_mutex);
  init_locked(&config);
}

void shutdown() {
  // From a callback: every runtime is asked to shut down and the call returns (a coordinator
  // cannot wait for itself); from any other thread, it returns once they have stopped.
  const bool wait = !in_callback();
  std::unique_lock<std::mutex> life(g_lifecycle_mutex, std::defer_lock);
  if (wait) life.lock();
  std::vector<std::shared_ptr<Runtime>> runtimes;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (auto& [id, entry] : process_sets()) {
      if (entry.runtime) runtimes.push_back(entry.runtime);
    }
    if (current_runtime()) runtimes.push_back(current_runtime());
  }
  for (const auto& rt : runtimes) rt->request_shutdown();
  if (!wait) return;
  for (const auto& rt : runtimes) rt->shutdown();
}

bool initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return current_runtime() && current_runtime()->running();
}

int rank() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return running_runtime("rank").rank();
}

int size() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return running_runtime("size").size();
}

int local_rank() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return running_runtime("local_rank").local_rank();
}

int local_size() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return running_runtime("local_size").local_size();
}

namespace {

// A handle already complete with `status`, for a call that reached no runtime. Takes the held
// g_mutex and releases it before the callback runs (on this thread): the callback may call the
// API, which takes g_mutex.
Handle reject(std::unique_lock<std::mutex>& held,
              const std::function<void(const Status&)>& callback, Status status) {
  if (!g_orphan_queue) g_orphan_queue = new TensorQueue();  // never destroyed
  TensorQueue* queue = g_orphan_queue;
  held.unlock();
  return kOrphanBit | queue->reject(callback, std::move(status));
}

// Runs `submit(runtime, set ranks)` on the runtime of `process_set` (the ranks are null for set
// 0), or completes a handle with the reason there is none: not initialised (kShutdown), an
// unknown set or one this rank is not in (kInvalidArgument).
template <class Submit>
Handle submit_or_reject(const std::string& name, const std::function<void(const Status&)>& callback,
                        int process_set, Submit submit) {
  std::unique_lock<std::mutex> lock(g_mutex);
  std::shared_ptr<Runtime> rt = current_runtime();
  if (!rt) {
    return reject(lock, callback,
                  Status(StatusCode::kShutdown, "tensor '" + name +
                                                    "': arcreduce is not initialised; call "
                                                    "arcreduce::init() first"));
  }
  std::vector<int> ranks;
  if (process_set != 0) {
    const auto it = process_sets().find(process_set);
    if (it == process_sets().end()) {
      return reject(lock, callback,
                    Status(StatusCode::kInvalidArgument,
                           "tensor '" + name + "': unknown process set " +
                               std::to_string(process_set) + " (removed, or never added)"));
    }
    if (!it->second.runtime) {
      return reject(lock, callback,
                    Status(StatusCode::kInvalidArgument,
                           "tensor '" + name + "': rank " + std::to_string(rt->rank()) +
                               " is not in process set " + std::to_string(process_set) +
                               " (ranks " + ranks_string(it->second.ranks) + ")"));
    }
    rt = it->second.runtime;
    ranks = it->second.ranks;
  }
  lock.unlock();  // rt keeps the runtime alive until this call returns
  return tag_handle(submit(*rt, process_set != 0 ? &ranks : nullptr), process_set);
}

// The runtime that holds `handle` (null when its set is gone or nothing is initialised).
std::shared_ptr<Runtime> runtime_of(Handle handle) {
  const int set = process_set_of(handle);
  if (set == 0) return current_runtime();
  const auto it = process_sets().find(set);
  return it == process_sets().end() ? nullptr : it->second.runtime;
}

}  // namespace

Handle allreduce_async(const std::string& name, Tensor tensor, AllreduceOptions options) {
  return submit_or_reject(name, options.callback, options.process_set,
                          [&](Runtime& rt, const std::vector<int>*) {
                            return rt.allreduce_async(name, tensor, options);
                          });
}

Handle broadcast_async(const std::string& name, Tensor tensor, int root_rank,
                       BroadcastOptions options) {
  return submit_or_reject(
      name, options.callback, options.process_set, [&](Runtime& rt, const std::vector<int>* ranks) {
        if (!ranks) return rt.broadcast_async(name, tensor, root_rank, options);
        // root_rank is a rank of the job, as in Horovod; the set's runtime counts its own.
        const int root = rank_in_set(*ranks, root_rank);
        if (root < 0) {
          return rt.refuse(name,
                           "broadcast: root rank " + std::to_string(root_rank) +
                               " is not in process set " + std::to_string(options.process_set) +
                               " (ranks " + ranks_string(*ranks) + ")",
                           Collective::kBroadcast, options.callback);
        }
        return rt.broadcast_async(name, tensor, root, options);
      });
}

Handle allgather_async(const std::string& name, Tensor tensor, CollectiveOptions options) {
  return submit_or_reject(name, options.callback, options.process_set,
                          [&](Runtime& rt, const std::vector<int>*) {
                            return rt.shaped_async(name, tensor, options, Collective::kAllgather);
                          });
}

Handle alltoall_async(const std::string& name, Tensor tensor, CollectiveOptions options) {
  return submit_or_reject(name, options.callback, options.process_set,
                          [&](Runtime& rt, const std::vector<int>*) {
                            return rt.shaped_async(name, tensor, options, Collective::kAlltoall);
                          });
}

Handle reducescatter_async(const std::string& name, Tensor tensor, CollectiveOptions options) {
  return submit_or_reject(
      name, options.callback, options.process_set, [&](Runtime& rt, const std::vector<int>*) {
        return rt.shaped_async(name, tensor, options, Collective::kReducescatter);
      });
}

int join() {
  std::unique_lock<std::mutex> lock(g_mutex);
  std::shared_ptr<Runtime> rt = current_runtime();
  if (!rt) running_runtime("join");  // throws: not initialised
  lock.unlock();                     // rt keeps the runtime alive while this call waits
  return rt->join();
}

Handle refuse(const std::string& name, const std::string& reason, int process_set) {
  return submit_or_reject(name, nullptr, process_set, [&](Runtime& rt, const std::vector<int>*) {
    return rt.refuse(name, reason, Collective::kAllreduce);
  });
}

bool poll(Handle handle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (handle & kOrphanBit) return true;
  const std::shared_ptr<Runtime> rt = runtime_of(handle);
  return rt ? rt->poll(queue_handle_of(handle)) : true;
}

Status synchronize(Handle handle) {
  std::unique_lock<std::mutex> lock(g_mutex);
  if (handle & kOrphanBit) {
    return g_orphan_queue ? g_orphan_queue->synchronize(handle & ~kOrphanBit)
                          : Status(StatusCode::kInvalidArgument, "unknown handle");
  }
  std::shared_ptr<Runtime> rt = runtime_of(handle);
  if (!rt && process_set_of(handle) != 0) {
    return Status(StatusCode::kInvalidArgument,
                  "a handle of process set " + std::to_string(process_set_of(handle)) +
                      ", which was removed (its pending ops failed with a shutdown error)");
  }
  if (!rt) {
    return Status(StatusCode::kShutdown, "arcreduce is not initialised; call arcreduce::init()");
  }
  lock.unlock();  // rt keeps the runtime alive while this call waits
  return rt->synchronize(queue_handle_of(handle));
}

Status allreduce(const std::string& name, Tensor tensor, AllreduceOptions options) {
  return synchronize(allreduce_async(name, std::move(tensor), std::move(options)));
}

Status broadcast(const std::string& name, Tensor tensor, int root_rank, BroadcastOptions options) {
  return synchronize(broadcast_async(name, std::move(tensor), root_rank, std::move(options)));
}

namespace {

// The current runtime (a reference that keeps it alive), or Error naming `what`.
std::shared_ptr<Runtime> current_or_throw(const char* what) {
  std::lock_guard<std::mutex> lock(g_mutex);
  running_runtime(what);  // throws: not initialised
  return current_runtime();
}

}  // namespace

void save_state(const std::string& path) {
  current_or_throw("save_state")->save_state(path);  // g_mutex free: it waits for the state
}

void load_state(const std::string& path) {
  current_or_throw("load_state")->load_state(path);
}

Stats stats() {
  return stats(0);
}

namespace {

// The entry of a process set other than 0, or Error naming `what` and the id.
ProcessSetEntry& process_set_entry(int process_set, const char* what) {
  const auto it = process_sets().find(process_set);
  if (it == process_sets().end()) {
    throw Error(std::string("arcreduce::") + what + "(" + std::to_string(process_set) +
                "): no such process set (removed, or never added)");
  }
  return it->second;
}

}  // namespace

int add_process_set(std::vector<int> ranks) {
  refuse_on_coordinator_thread("add_process_set");
  // g_lifecycle_mutex, not g_mutex, across the MPI calls below: the agreement blocks until every
  // rank calls, and callbacks (which take g_mutex) must go on meanwhile.
  std::lock_guard<std::mutex> life(g_lifecycle_mutex);
  const std::shared_ptr<Runtime> global = current_or_throw("add_process_set");
  std::sort(ranks.begin(), ranks.end());
  const std::string what = "arcreduce::add_process_set(" + ranks_string(ranks) + ")";
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    throw Error(what +
                ": process sets need MPI_THREAD_MULTIPLE (each set's runtime calls MPI "
                "from a thread of its own); MPI provides thread level " +
                std::to_string(provided));
  }
  std::string error = check_process_set_ranks(ranks, global->size());
  if (error.empty() && static_cast<int>(ranks.size()) == global->size()) {
    error = "these are the ranks of process set 0 (every rank of the job)";
  }
  int id = 0;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& [set_id, entry] : process_sets()) {
      if (error.empty() && entry.ranks == ranks) {
        error = "process set " + std::to_string(set_id) + " has these ranks already";
      }
    }
    if (error.empty() && g_next_process_set_id > kMaxProcessSetId) {
      error = "no process set ids left (" + std::to_string(kMaxProcessSetId) + " were added)";
    }
    id = g_next_process_set_id;  // only this call (g_lifecycle_mutex) advances it
  }
  if (g_process_set_comm == MPI_COMM_NULL) {
    if (MPI_Comm_dup(MPI_COMM_WORLD, &g_process_set_comm) != MPI_SUCCESS) {
      throw Error(what + ": MPI_Comm_dup failed", StatusCode::kInternal);
    }
  }
  agree_on_process_set(g_process_set_comm, ranks, error, what);  // throws on every rank
  const bool member = rank_in_set(ranks, global->rank()) >= 0;
  MPI_Comm set_comm = MPI_COMM_NULL;
  if (MPI_Comm_split(g_process_set_comm, member ? 0 : MPI_UNDEFINED, global->rank(), &set_comm) !=
      MPI_SUCCESS) {
    throw Error(what + ": MPI_Comm_split failed", StatusCode::kInternal);
  }
  ProcessSetEntry entry;
  entry.ranks = ranks;
  if (member) {
    Config config = global->config();
    if (!config.timeline.empty()) config.timeline = process_set_timeline(config.timeline, id);
    std::unique_ptr<MpiCommunicator> comm;
    try {
      comm = std::make_unique<MpiCommunicator>(set_comm, communicator_options(config));
    } catch (...) {
      MPI_Comm_free(&set_comm);
      throw;
    }
    MPI_Comm_free(&set_comm);  // the communicator holds a duplicate
    entry.runtime = std::make_shared<Runtime>(config, std::move(comm));
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_next_process_set_id = id + 1;
  process_sets()[id] = std::move(entry);
  return id;
}

void remove_process_set(int process_set) {
  refuse_on_coordinator_thread("remove_process_set");
  std::lock_guard<std::mutex> life(g_lifecycle_mutex);
  std::shared_ptr<Runtime> rt;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (process_set == 0) {
      throw Error("arcreduce::remove_process_set(0): process set 0 (every rank) is the job's own");
    }
    rt = std::move(process_set_entry(process_set, "remove_process_set").runtime);
    process_sets().erase(process_set);
  }
  retire(std::move(rt));
}

std::vector<int> process_set_ranks(int process_set) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (process_set == 0) {
    std::vector<int> all(static_cast<size_t>(running_runtime("process_set_ranks").size()));
    for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
    return all;
  }
  return process_set_entry(process_set, "process_set_ranks").ranks;
}

int process_set_rank(int process_set) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const int global = running_runtime("process_set_rank").rank();
  if (process_set == 0) return global;
  return rank_in_set(process_set_entry(process_set, "process_set_rank").ranks, global);
}

std::vector<int> process_set_ids() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<int> ids{0};
  for (const auto& [id, entry] : process_sets()) ids.push_back(id);
  return ids;
}

Stats stats(int process_set) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (process_set == 0) return current_runtime() ? current_runtime()->stats() : Stats();
  const ProcessSetEntry& entry = process_set_entry(process_set, "stats");
  return entry.runtime ? entry.runtime->stats() : Stats();
}

}  // namespace arcreduce
