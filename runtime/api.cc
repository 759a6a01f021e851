// The process-wide API: one Runtime over MPI_COMM_WORLD, created by init().
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
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

std::mutex g_mutex;
// The current runtime, replaced only by init() and torn down by the exit handler, both under
// g_mutex. Calls that use it after releasing g_mutex (submissions, synchronize()) hold a
// reference, so a runtime that another thread replaces or tears down meanwhile stays alive until
// the last such call returns. Never destroyed by static destruction: the atexit handler tears the
// runtime down before MPI_Finalize.
std::shared_ptr<Runtime>& current_runtime() {
  static auto* runtime = new std::shared_ptr<Runtime>();
  return *runtime;
}
// Runtimes still used by a call when they were retired (see retire()): kept alive for good.
std::vector<std::shared_ptr<Runtime>>& parked_runtimes() {
  static auto* parked = new std::vector<std::shared_ptr<Runtime>>();
  return *parked;
}
bool g_we_initialized_mpi = false;
// Handles of calls made while no runtime exists; the top bit keeps them apart from a runtime's.
TensorQueue* g_orphan_queue = nullptr;
constexpr Handle kOrphanBit = 1ull << 63;
// How long retire() waits for the calls still using a retired runtime.
constexpr std::chrono::seconds kRetireWait(10);

// Destroys `old`, a runtime that is no longer current, once the calls still using it have
// returned. It is shut down first so that they return promptly: its pending ops complete with
// kShutdown and new submissions are rejected. Called with g_mutex held on the thread of init()
// or of the exit handler, so its communicator is freed on a thread that makes MPI calls anyway.
// A call that does not return in time (a callback that blocks, or one that calls init() itself)
// keeps the runtime alive for the rest of the process rather than have it freed under its feet.
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
      parked_runtimes().push_back(std::move(old));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  old.reset();  // the last reference: the runtime is destroyed here
}

void finalize_at_exit() {
  std::lock_guard<std::mutex> lock(g_mutex);
  retire(std::move(current_runtime()));
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_we_initialized_mpi && !finalized) MPI_Finalize();
}

void ensure_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw Error("arcreduce::init(): MPI was already finalized in this process");
  int provided = 0;
  if (!initialized) {
    if (apply_mpi_environment_defaults()) {
      spdlog::debug("arcreduce: {}={} (docs/runtime.md)", kEnvTcpEagerLimit, kTcpEagerLimitBytes);
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

void init_locked(const Config* config) {
  std::shared_ptr<Runtime>& current = current_runtime();
  if (current && current->running()) return;  // init() twice is harmless, as in Horovod
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
      options.algorithm = parse_allreduce_algorithm(parsed->allreduce_algorithm);
      options.wait = wait_policy_of(*parsed);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  auto comm = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, options);
  if (!error.empty()) agree_on_config(*comm, nullptr, error);  // throws on every rank
  std::shared_ptr<Runtime> old =
      std::exchange(current, std::make_shared<Runtime>(*parsed, std::move(comm)));
  retire(std::move(old));
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
  std::lock_guard<std::mutex> lock(g_mutex);
  init_locked(nullptr);
}

void init(const Config& config) {
  std::lock_guard<std::mutex> lock(g_mutex);
  init_locked(&config);
}

void shutdown() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (current_runtime()) current_runtime()->shutdown();
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

// Runs `submit` on the runtime, or completes a handle with kShutdown when there is none.
template <class Submit>
Handle submit_or_reject(const std::string& name, const std::function<void(const Status&)>& callback,
                        Submit submit) {
  std::unique_lock<std::mutex> lock(g_mutex);
  if (std::shared_ptr<Runtime> rt = current_runtime()) {
    lock.unlock();  // rt keeps the runtime alive until this call returns
    return submit(*rt);
  }
  if (!g_orphan_queue) g_orphan_queue = new TensorQueue();
  return kOrphanBit |
         g_orphan_queue->reject(
             callback, Status(StatusCode::kShutdown, "tensor '" + name +
                                                         "': arcreduce is not initialised; call "
                                                         "arcreduce::init() first"));
}

}  // namespace

Handle allreduce_async(const std::string& name, Tensor tensor, AllreduceOptions options) {
  return submit_or_reject(name, options.callback,
                          [&](Runtime& rt) { return rt.allreduce_async(name, tensor, options); });
}

Handle broadcast_async(const std::string& name, Tensor tensor, int root_rank,
                       BroadcastOptions options) {
  return submit_or_reject(name, options.callback, [&](Runtime& rt) {
    return rt.broadcast_async(name, tensor, root_rank, options);
  });
}

Handle allgather_async(const std::string& name, Tensor tensor, CollectiveOptions options) {
  return submit_or_reject(name, options.callback, [&](Runtime& rt) {
    return rt.shaped_async(name, tensor, options, Collective::kAllgather);
  });
}

Handle alltoall_async(const std::string& name, Tensor tensor, CollectiveOptions options) {
  return submit_or_reject(name, options.callback, [&](Runtime& rt) {
    return rt.shaped_async(name, tensor, options, Collective::kAlltoall);
  });
}

Handle reducescatter_async(const std::string& name, Tensor tensor, CollectiveOptions options) {
  return submit_or_reject(name, options.callback, [&](Runtime& rt) {
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

Handle refuse(const std::string& name, const std::string& reason) {
  return submit_or_reject(
      name, nullptr, [&](Runtime& rt) { return rt.refuse(name, reason, Collective::kAllreduce); });
}

bool poll(Handle handle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (handle & kOrphanBit) return true;
  return current_runtime() ? current_runtime()->poll(handle) : true;
}

Status synchronize(Handle handle) {
  std::unique_lock<std::mutex> lock(g_mutex);
  if (handle & kOrphanBit) {
    return g_orphan_queue ? g_orphan_queue->synchronize(handle & ~kOrphanBit)
                          : Status(StatusCode::kInvalidArgument, "unknown handle");
  }
  std::shared_ptr<Runtime> rt = current_runtime();
  if (!rt) {
    return Status(StatusCode::kShutdown, "arcreduce is not initialised; call arcreduce::init()");
  }
  lock.unlock();  // rt keeps the runtime alive while this call waits
  return rt->synchronize(handle);
}

Status allreduce(const std::string& name, Tensor tensor, AllreduceOptions options) {
  return synchronize(allreduce_async(name, std::move(tensor), std::move(options)));
}

Status broadcast(const std::string& name, Tensor tensor, int root_rank, BroadcastOptions options) {
  return synchronize(broadcast_async(name, std::move(tensor), root_rank, std::move(options)));
}

void save_state(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  running_runtime("save_state").save_state(path);
}

void load_state(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  running_runtime("load_state").load_state(path);
}

Stats stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return current_runtime() ? current_runtime()->stats() : Stats();
}

}  // namespace arcreduce
