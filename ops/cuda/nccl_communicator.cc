#include "ops/cuda/nccl_communicator.h"

#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "arcreduce/build_config.h"
#include "arcreduce/status.h"
#include "ops/cuda/cuda_handles.h"
#include "ops/mpi_cuda_support.h"

#if ARCREDUCE_NCCL
#include <nccl.h>

// ncclBfloat16 and ncclCommGetAsyncError's semantics used here need NCCL 2.10 or later.
static_assert(NCCL_VERSION_CODE >= 21000, "arcreduce's NCCL communicator needs NCCL >= 2.10");
// nccl_data_type() (ops/mpi_cuda_support.h) mirrors these values so that it needs no nccl.h.
static_assert(ncclFloat16 == 6 && ncclFloat32 == 7 && ncclFloat64 == 8 && ncclBfloat16 == 9,
              "nccl_data_type() disagrees with nccl.h");

// ARC_NCCL_CHECK(call): runs an NCCL call and throws arcreduce::Error (throw_nccl_error) when it
// does not return ncclSuccess.
#define ARC_NCCL_CHECK(call)                                                               \
  do {                                                                                     \
    const ncclResult_t arc_nccl_rc_ = (call);                                              \
    if (arc_nccl_rc_ != ncclSuccess) {                                                     \
      ::arcreduce::cuda::throw_nccl_error(static_cast<int>(arc_nccl_rc_), #call, __FILE__, \
                                          __LINE__);                                       \
    }                                                                                      \
  } while (0)
#endif

namespace arcreduce {
namespace cuda {
namespace {

std::string describe(int device, const Communicator* comm) {
  std::string s = "NCCL communicator on CUDA device " + std::to_string(device);
  if (comm)
    s += " (rank " + std::to_string(comm->rank()) + " of " + std::to_string(comm->size()) + ")";
  return s;
}

#if ARCREDUCE_NCCL
void log_release_failure(const std::string& what) noexcept {
  try {
    spdlog::warn("arcreduce: {} failed while releasing", what);
  } catch (...) {
  }
}
#endif

}  // namespace

bool nccl_compiled() {
  return ARCREDUCE_NCCL != 0;
}

#if ARCREDUCE_NCCL

void throw_nccl_error(int result, const char* call, const char* file, int line) {
  std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                        ": " + ncclGetErrorString(static_cast<ncclResult_t>(result));
  // NCCL's last error message (the communicator argument is unused by NCCL) says what failed
  // inside it, e.g. which peer or which CUDA call.
  const char* detail = ncclGetLastError(nullptr);
  if (detail && *detail) message += std::string(" (NCCL: ") + detail + ")";
  throw Error(message, StatusCode::kInternal);
}

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  int device = 0;
  int rank = 0;
  int size = 0;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (!comm) return;
    std::unique_ptr<DeviceGuard> guard;
    try {
      guard = std::make_unique<DeviceGuard>(device);
    } catch (...) {
      log_release_failure("selecting CUDA device " + std::to_string(device));
    }
    // After an asynchronous error, ncclCommDestroy could wait for work that never finishes;
    // ncclCommAbort stops it instead.
    ncclResult_t async = ncclSuccess;
    const bool failed = ncclCommGetAsyncError(comm, &async) != ncclSuccess ||
                        (async != ncclSuccess && async != ncclInProgress);
    const ncclResult_t rc = failed ? ncclCommAbort(comm) : ncclCommDestroy(comm);
    if (rc != ncclSuccess) {
      log_release_failure(std::string(failed ? "ncclCommAbort" : "ncclCommDestroy") + " on " +
                          describe(device, nullptr) + ": " + ncclGetErrorString(rc));
    }
  }
};

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& comm, int device) {
  const std::string where = describe(device, &comm);
  // Local preparation; its failure is exchanged below before anyone enters ncclCommInitRank.
  std::string error;
  std::unique_ptr<DeviceGuard> guard;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  try {
    guard = std::make_unique<DeviceGuard>(device);
    if (comm.rank() == 0) ARC_NCCL_CHECK(ncclGetUniqueId(&id));
  } catch (const Error& e) {
    error = e.what();
  }
  // Rank 0's id, preceded by whether rank 0 has one.
  std::vector<uint8_t> message(1 + sizeof(id), 0);
  message[0] = comm.rank() == 0 && error.empty() ? 1 : 0;
  std::memcpy(message.data() + 1, &id, sizeof(id));
  comm.broadcast(message.data(), message.size(), 0);
  if (error.empty() && message[0] == 0) error = "rank 0 could not create NCCL's unique id";
  std::memcpy(&id, message.data() + 1, sizeof(id));

  std::vector<uint8_t> failed(static_cast<size_t>(comm.size()), 0);
  const uint8_t mine = error.empty() ? 0 : 1;
  comm.allgather(&mine, 1, failed.data());
  if (!error.empty()) throw Error(where + ": " + error, StatusCode::kInternal);
  std::string failing;
  for (int r = 0; r < comm.size(); ++r) {
    if (failed[static_cast<size_t>(r)])
      failing += (failing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!failing.empty()) {
    throw Error(where + ": not created because rank(s) " + failing +
                    " could not prepare theirs (their errors say why)",
                StatusCode::kInternal);
  }

  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->rank = comm.rank();
  impl->size = comm.size();
  try {
    ARC_NCCL_CHECK(ncclCommInitRank(&impl->comm, comm.size(), id, comm.rank()));
  } catch (const Error& e) {
    // The handle is not released: after a failed initialisation it need not be valid.
    impl->comm = nullptr;
    throw Error(where + ": " + e.what(), StatusCode::kInternal);
  }
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl)));
}

void NcclCommunicator::allreduce(void* data, size_t count, ScalarType type, cudaStream_t stream) {
  const int nccl_type = nccl_data_type(type);
  if (nccl_type < 0) {
    throw Error(describe(impl_->device, nullptr) + ": no NCCL sum of " + scalar_type_name(type) +
                    " (float32, float64, float16, bfloat16 only)",
                StatusCode::kInternal);
  }
  if (count == 0) return;
  DeviceGuard guard(impl_->device);
  ARC_NCCL_CHECK(ncclAllReduce(data, data, count, static_cast<ncclDataType_t>(nccl_type), ncclSum,
                               impl_->comm, stream));
}

void NcclCommunicator::check_async() {
  ncclResult_t async = ncclSuccess;
  ARC_NCCL_CHECK(ncclCommGetAsyncError(impl_->comm, &async));
  if (async != ncclSuccess && async != ncclInProgress) {
    throw_nccl_error(static_cast<int>(async),
                     ("asynchronous work of the " + describe(impl_->device, nullptr)).c_str(),
                     __FILE__, __LINE__);
  }
}

#else  // !ARCREDUCE_NCCL: no instance can be created.

void throw_nccl_error(int result, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                  ": NCCL result " + std::to_string(result),
              StatusCode::kInternal);
}

struct NcclCommunicator::Impl {
  int device = 0;
  int rank = 0;
  int size = 0;
};

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& comm, int device) {
  (void)comm;
  throw Error(describe(device, nullptr) +
                  ": this build of arcreduce has no NCCL (configured with ARCREDUCE_NCCL=OFF or "
                  "without nccl.h and libnccl); ARCREDUCE_CUDA_TRANSPORT=auto or mpi reduces "
                  "device buffers through MPI",
              StatusCode::kInvalidArgument);
}

void NcclCommunicator::allreduce(void* data, size_t count, ScalarType type, cudaStream_t stream) {
  (void)data;
  (void)count;
  (void)type;
  (void)stream;
  throw Error("NCCL All-Reduce: this build of arcreduce has no NCCL", StatusCode::kInternal);
}

void NcclCommunicator::check_async() {}

#endif

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::device() const {
  return impl_->device;
}

int NcclCommunicator::rank() const {
  return impl_->rank;
}

int NcclCommunicator::size() const {
  return impl_->size;
}

}  // namespace cuda
}  // namespace arcreduce
