// The process-wide API: one Runtime over MPI_COMM_WORLD, created by init().
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "arcreduce/arcreduce.h"
#include "ops/allreduce_algorithm.h"
#include "ops/mpi_communicator.h"
#include "runtime/config_agreement.h"
#include "runtime/runtime.h"

namespace arcreduce {
namespace {

WaitPolicy wait_policy_of(const Config& config) {
  WaitPolicy policy;
  policy.mode = parse_wait_mode(config.wait_mode);
  policy.max_sleep = std::chrono::microseconds(std::max<int64_t>(1, config.wait_max_sleep_us));
  policy.min_sleep = std::min(policy.min_sleep, policy.max_sleep);
  policy.spin = std::chrono::microseconds(std::max<int64_t>(0, config.wait_spin_us));
  return policy;
}

std::mutex g_mutex;
// Never destroyed by static destruction: the atexit handler tears it down before MPI_Finalize.
Runtime* g_runtime = nullptr;
bool g_we_initialized_mpi = false;
// Handles of calls made while no runtime exists; the top bit keeps them apart from a runtime's.
TensorQueue* g_orphan_queue = nullptr;
constexpr Handle kOrphanBit = 1ull << 63;

void finalize_at_exit() {
  std::lock_guard<std::mutex> lock(g_mutex);
  delete g_runtime;
  g_runtime = nullptr;
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
  if (g_runtime && g_runtime->running()) return;  // init() twice is harmless, as in Horovod
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
  auto runtime = std::make_unique<Runtime>(*parsed, std::move(comm));
  delete g_runtime;
  g_runtime = runtime.release();
}

Runtime& running_runtime(const char* what) {
  if (!g_runtime) {
    throw Error(std::string("arcreduce::") + what +
                    "(): arcreduce is not initialised; call "
                    "arcreduce::init() first",
                StatusCode::kShutdown);
  }
  return *g_runtime;
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
  if (g_runtime) g_runtime->shutdown();
}

bool initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_runtime && g_runtime->running();
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
  if (g_runtime) {
    Runtime* rt = g_runtime;
    lock.unlock();  // the runtime outlives this call: it is only replaced by init()
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

bool poll(Handle handle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (handle & kOrphanBit) return true;
  return g_runtime ? g_runtime->poll(handle) : true;
}

Status synchronize(Handle handle) {
  std::unique_lock<std::mutex> lock(g_mutex);
  if (handle & kOrphanBit) {
    return g_orphan_queue ? g_orphan_queue->synchronize(handle & ~kOrphanBit)
                          : Status(StatusCode::kInvalidArgument, "unknown handle");
  }
  if (!g_runtime) {
    return Status(StatusCode::kShutdown, "arcreduce is not initialised; call arcreduce::init()");
  }
  Runtime* rt = g_runtime;
  lock.unlock();
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
  return g_runtime ? g_runtime->stats() : Stats();
}

}  // namespace arcreduce
