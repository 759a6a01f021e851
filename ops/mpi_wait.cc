#include "ops/mpi_wait.h"

#include <sched.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdint>
#include <cstdio>

#include <algorithm>
#include <thread>
#include <tuple>

#include "arcreduce/status.h"
#include "ops/communicator.h"
#include "ops/mpi_check.h"

namespace arcreduce {

const std::vector<std::string>& wait_mode_names() {
  static const std::vector<std::string> names = {"sleep", "yield", "busy"};  // default first
  return names;
}

WaitMode parse_wait_mode(const std::string& name) {
  if (name == "busy") return WaitMode::kBusy;
  if (name == "yield") return WaitMode::kYield;
  if (name == "sleep") return WaitMode::kSleep;
  throw Error("unknown wait mode '" + name + "' (expected sleep, yield or busy)",
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

WaitHistory::WaitHistory() {
  for (auto& q : quick_) q.store(kOne, std::memory_order_relaxed);
}

size_t WaitHistory::size_class(size_t bytes) {
  size_t c = 0;
  while (bytes >= 4 && c + 1 < std::tuple_size<decltype(quick_)>::value) {
    bytes /= 4;
    ++c;
  }
  return c;
}

std::chrono::microseconds WaitHistory::spin_for(size_t bytes,
                                                std::chrono::microseconds spin) const {
  if (quick_[size_class(bytes)].load(std::memory_order_relaxed) >= kOne / 2) return spin;
  return std::min(spin, kShortSpin);
}

void WaitHistory::record(size_t bytes, std::chrono::microseconds spin,
                         std::chrono::steady_clock::duration waited) {
  std::atomic<uint32_t>& q = quick_[size_class(bytes)];
  const uint32_t sample = waited <= spin ? kOne : 0;
  const uint32_t old = q.load(std::memory_order_relaxed);
  // old + (sample - old) / 8, in unsigned arithmetic.
  q.store(sample >= old ? old + (sample - old) / 8 : old - (old - sample) / 8,
          std::memory_order_relaxed);
}

double WaitHistory::quick_fraction(size_t bytes) const {
  return static_cast<double>(quick_[size_class(bytes)].load(std::memory_order_relaxed)) / kOne;
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

constexpr int kQuietFraction = 16;
// A wait loop looks at the clock at least every max_sleep or kLongestExpectedSleep (at most
// 100 ms); a longer gap means
// this process itself was not running (SIGSTOP of the whole job, a suspended terminal), and that
// time must not count against the peers.
constexpr std::chrono::seconds kOwnStopGap(1);

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

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

[[noreturn]] void throw_timeout(const WaitPolicy& policy, int count, int remaining) {
  const double seconds = std::chrono::duration<double>(policy.timeout).count();
  throw CommunicationTimeout("no progress for " + format_seconds(seconds) +
                             " s (ARCREDUCE_STALL_SHUTDOWN_SECONDS) with " +
                             std::to_string(remaining) + " of " + std::to_string(count) +
                             " MPI requests still open: a peer rank stopped taking part");
}

}  // namespace

std::chrono::microseconds expected_wait(size_t bytes, const WaitPolicy& policy) {
  if (policy.mode != WaitMode::kSleep) return std::chrono::microseconds(0);
  // Beyond 16 times the longest sleep a prediction changes nothing; the bound also keeps the
  // conversion in range (and a NaN fails every comparison, so it gives 0).
  const double limit = static_cast<double>(kLongestExpectedSleep.count()) * kQuietFraction;
  const double us = static_cast<double>(bytes) * policy.seconds_per_byte * 1e6;
  if (!(us > 0)) return std::chrono::microseconds(0);
  return std::chrono::microseconds(static_cast<int64_t>(std::min(us, limit)));
}

void run_wait_loop(const WaitPolicy& policy, std::chrono::microseconds spin,
                   const WaitLoopHooks& hooks, std::chrono::microseconds expected) {
  using TimePoint = WaitLoopHooks::TimePoint;
  const bool bounded = policy.timeout.count() > 0;
  const TimePoint start = hooks.now();
  const TimePoint spin_until = start + spin;
  TimePoint quiet_since = start;  // start, or the last partial completion
  // The timeout counts from the start or the last completion of any request (a long ring makes
  // progress step by step; a single request has only its start).
  TimePoint last_progress = start;
  TimePoint last_look = start;
  auto check_timeout = [&](TimePoint now, bool progressed) {
    if (progressed || now - last_look > kOwnStopGap) last_progress = now;
    last_look = now;
    if (bounded && now - last_progress > policy.timeout) hooks.timeout();
  };
  // A wait that cannot end before `expected` sleeps 1/16 of it at a time from its first sleep,
  // so it is noticed at most about 1/16 of its length late, as a long wait is without a
  // prediction, but wakes about 16 times instead of ramping up through short sleeps. The
  // prediction covers the wait as a whole: after a completion the back-off rules alone apply.
  std::chrono::microseconds expected_sleep =
      std::min(expected / kQuietFraction, kLongestExpectedSleep);
  std::chrono::microseconds sleep = std::max(policy.min_sleep, expected_sleep);
  // Completions not yet acted on: those of the burst after a sleep count at the next decision,
  // so that they restart the back-off as those of the first test do.
  bool progressed = false;
  while (true) {
    if (hooks.poll(&progressed)) return;
    if (policy.mode != WaitMode::kSleep) {
      if (policy.mode == WaitMode::kYield) hooks.yield();
      if (bounded) check_timeout(hooks.now(), progressed);
      progressed = false;
      continue;
    }
    const TimePoint now = hooks.now();
    check_timeout(now, progressed);
    if (progressed) {
      sleep = policy.min_sleep;
      expected_sleep = std::chrono::microseconds(0);
      quiet_since = now;
      progressed = false;
    }
    if (now < spin_until) {
      hooks.yield();  // the spin leaves the core to a runnable training thread
      continue;
    }
    // A completion is noticed at most about 1/16 of the quiet time late; a long wait (a slow
    // link) wakes rarely, a short one stays prompt.
    const auto bound = std::max(
        std::chrono::duration_cast<std::chrono::microseconds>(now - quiet_since) / kQuietFraction,
        expected_sleep);
    hooks.sleep(std::max(policy.min_sleep, std::min(sleep, bound)));
    sleep = std::max(std::min(sleep * 2, policy.max_sleep), expected_sleep);
    // Open MPI runs some progress callbacks (libnbc's schedules among them) only on every
    // eighth progress call: poll in a burst after each sleep so one wake-up advances them.
    for (int i = 0; i < std::max(policy.poll_burst, 1); ++i) {
      if (hooks.poll(&progressed)) return;
    }
  }
}

void wait_requests(MPI_Request* requests, int count, MPI_Status* statuses, const WaitPolicy& policy,
                   size_t bytes) {
  if (count <= 0) return;
  const bool bounded = policy.timeout.count() > 0;
  if (policy.mode == WaitMode::kBusy && !bounded) {
    ARC_MPI_CHECK(MPI_Waitall(count, requests, statuses));
    return;
  }
  int remaining = 0;
  for (int i = 0; i < count; ++i) remaining += requests[i] != MPI_REQUEST_NULL;
  if (remaining == 0) return;
  std::vector<int> indices;
  std::vector<MPI_Status> scratch;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  WaitHistory* history = policy.mode == WaitMode::kSleep ? policy.history.get() : nullptr;
  // Tells the history how long this wait took, however it ends.
  struct Recorder {
    WaitHistory* history;
    size_t bytes;
    std::chrono::microseconds spin;
    Clock::time_point start;
    ~Recorder() {
      if (history) history->record(bytes, spin, Clock::now() - start);
    }
  } recorder{history, bytes, policy.spin, start};
  WaitLoopHooks hooks;
  hooks.poll = [&](bool* progressed) {
    return test(requests, count, statuses, &remaining, progressed, &indices, &scratch);
  };
  hooks.now = [] { return Clock::now(); };
  hooks.sleep = [](std::chrono::microseconds d) { std::this_thread::sleep_for(d); };
  hooks.yield = [] { sched_yield(); };
  hooks.timeout = [&] { throw_timeout(policy, count, remaining); };
  run_wait_loop(policy, history ? history->spin_for(bytes, policy.spin) : policy.spin, hooks,
                expected_wait(bytes, policy));
}

}  // namespace arcreduce
