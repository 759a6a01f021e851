#include "ops/mpi_wait.h"

#include <sched.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdint>

#include <algorithm>
#include <thread>

#include "arcreduce/status.h"
#include "ops/mpi_check.h"

namespace arcreduce {

const std::vector<std::string>& wait_mode_names() {
  static const std::vector<std::string> names = {"busy", "yield", "sleep"};
  return names;
}

WaitMode parse_wait_mode(const std::string& name) {
  if (name == "busy") return WaitMode::kBusy;
  if (name == "yield") return WaitMode::kYield;
  if (name == "sleep") return WaitMode::kSleep;
  throw Error("unknown wait mode '" + name + "' (expected busy, yield or sleep)",
              StatusCode::kInvalidArgument);
}

const char* wait_mode_name(WaitMode mode) {
  switch (mode) {
    case WaitMode::kBusy:
      return "busy";
    case WaitMode::kYield:
      return "yield";
    case WaitMode::kSleep:
      return "sleep";
  }
  return "?";
}

void tighten_timer_slack() {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // 1 us, in nanoseconds
#endif
}

bool request_short_slice(std::chrono::microseconds slice) {
#if defined(__linux__) && defined(SYS_sched_setattr)
  // The kernel's struct sched_attr (include/uapi/linux/sched/types.h); glibc 2.36 has no
  // wrapper.
  struct Attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
  };
  Attr attr{};
  attr.size = sizeof(attr);
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = static_cast<int32_t>(getpriority(PRIO_PROCESS, 0));
  attr.sched_runtime = static_cast<uint64_t>(slice.count()) * 1000;  // nanoseconds
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
#else
  (void)slice;
  return false;
#endif
}

namespace {

constexpr int kPollBurst = 16;

// MPI_Testall completes nothing until all are done; MPI_Testsome reports partial progress,
// which resets the back-off. Returns true when every request is done.
bool test(MPI_Request* requests, int count, MPI_Status* statuses, int* remaining, bool* progressed,
          std::vector<int>* indices, std::vector<MPI_Status>* scratch) {
  if (count == 1) {
    int done = 0;
    ARC_MPI_CHECK(
        MPI_Test(requests, &done, statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : statuses));
    return done != 0;
  }
  int outcount = 0;
  indices->resize(count);
  scratch->resize(count);
  ARC_MPI_CHECK(MPI_Testsome(count, requests, &outcount, indices->data(), scratch->data()));
  if (outcount == MPI_UNDEFINED) return true;  // every request is MPI_REQUEST_NULL
  if (statuses != MPI_STATUSES_IGNORE) {
    for (int i = 0; i < outcount; ++i) statuses[(*indices)[i]] = (*scratch)[i];
  }
  if (outcount > 0) {
    *progressed = true;
    *remaining -= outcount;
  }
  return *remaining <= 0;
}

}  // namespace

void wait_requests(MPI_Request* requests, int count, MPI_Status* statuses,
                   const WaitPolicy& policy) {
  if (count <= 0) return;
  if (policy.mode == WaitMode::kBusy) {
    ARC_MPI_CHECK(MPI_Waitall(count, requests, statuses));
    return;
  }
  int remaining = 0;
  for (int i = 0; i < count; ++i) remaining += requests[i] != MPI_REQUEST_NULL;
  if (remaining == 0) return;
  std::vector<int> indices;
  std::vector<MPI_Status> scratch;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point spin_until = Clock::now() + policy.spin;
  std::chrono::microseconds sleep = policy.min_sleep;
  while (true) {
    bool progressed = false;
    if (test(requests, count, statuses, &remaining, &progressed, &indices, &scratch)) return;
    if (policy.mode == WaitMode::kYield) {
      sched_yield();
      continue;
    }
    if (Clock::now() < spin_until) continue;
    if (progressed) sleep = policy.min_sleep;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, policy.max_sleep);
    // Open MPI runs some progress callbacks (libnbc's schedules among them) only on every
    // eighth progress call: poll in a burst after each sleep so one wake-up advances them.
    for (int i = 0; i < kPollBurst; ++i) {
      if (test(requests, count, statuses, &remaining, &progressed, &indices, &scratch)) return;
    }
  }
}

}  // namespace arcreduce
