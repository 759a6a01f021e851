// How the coordinator waits for MPI requests (ARCREDUCE_WAIT_MODE,
// docs/design/runtime-waiting.md, "Waiting").
//
// Open MPI's blocking calls poll their transports in a loop: a rank waiting for a slower peer or
// for bytes on a slow link keeps a whole core busy, the core the training thread needs for
// backward. Every MpiCommunicator call is therefore posted as a non-blocking MPI operation and
// completed by wait_requests() under a WaitPolicy:
//   kBusy   MPI_Waitall: Open MPI polls until done (its blocking behaviour).
//   kYield  MPI_Testall, then sched_yield(), until done: polls, but gives the core to any other
//           runnable thread between polls.
//   kSleep  MPI_Testall with sched_yield() for `spin` (completions that come within
//           microseconds cost no sleep), then sleeps between polls, starting at `min_sleep` and
//           doubling up to `max_sleep` and never longer than 1/16 of the time waited (since
//           the start or the last partial completion); the sleep drops back to `min_sleep` whenever
//           a request of a multi-request wait completes, so a stream of messages is polled
//           promptly. A wait whose least length E is known from the link (seconds_per_byte)
//           sleeps E/16 at a time until its first completion.
// The mode is local to a rank: every mode posts the same non-blocking operations, so ranks with
// different modes still match each other's messages.
#pragma once

#include "ops/mpi_include.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace arcreduce {

enum class WaitMode { kBusy, kYield, kSleep };

// What recent waits took, per message size (classes of powers of 4 bytes), so that kSleep polls
// only where polling pays: a wait that usually ends within the spin time (a fast peer, shared
// memory) polls for the whole spin; one that usually does not (a late peer, a slow link) would
// only take the core from the training thread for the whole spin, so it polls for kShortSpin
// before it sleeps. Each class keeps a moving average (weight 1/8) of "ended within the spin";
// a class polls the whole spin while that average is at least one half. Fresh classes poll.
// Safe to share between threads (relaxed atomics); one per communicator.
class WaitHistory {
 public:
  static constexpr std::chrono::microseconds kShortSpin{20};

  WaitHistory();
  // How long a wait for `bytes` polls before its first sleep, given the configured spin.
  std::chrono::microseconds spin_for(size_t bytes, std::chrono::microseconds spin) const;
  // A wait for `bytes` took `waited`; it counts as quick when that is at most `spin`.
  void record(size_t bytes, std::chrono::microseconds spin,
              std::chrono::steady_clock::duration waited);
  // The moving average of quick waits of `bytes`' class, 0..1 (for tests).
  double quick_fraction(size_t bytes) const;

 private:
  static size_t size_class(size_t bytes);
  static constexpr uint32_t kOne = 1u << 16;
  std::array<std::atomic<uint32_t>, 20> quick_;  // fixed point, kOne = all quick
};

struct WaitPolicy {
  WaitMode mode = WaitMode::kSleep;
  std::chrono::microseconds spin{50};
  std::chrono::microseconds min_sleep{10};
  std::chrono::microseconds max_sleep{2000};
  // kSleep: tests after each sleep. Open MPI advances its non-blocking collectives (libnbc) only
  // on every eighth progress call, so a wake-up that should move one on tests in a burst; a
  // point-to-point request advances on every call, and each test costs a poll() of every
  // socket (the TCP transport), so waits for those use point_to_point() (one test).
  int poll_burst = 16;
  // Longest time a wait may go without any of its requests completing; then wait_requests
  // throws CommunicationTimeout (ops/communicator.h). 0: wait forever. kBusy then polls with
  // MPI_Testsome instead of MPI_Waitall, so that it can look at the clock.
  std::chrono::milliseconds timeout{0};
  // kSleep: learns per message size whether to poll for `spin` or only WaitHistory::kShortSpin.
  // Null: always `spin`. Copies of a policy share it.
  std::shared_ptr<WaitHistory> history;
  // kSleep: the time one byte of these waits takes over the link it crosses (the link model's
  // seconds_per_byte, every link busy), 0 where unknown. A wait for `bytes` then cannot end
  // before E = bytes * seconds_per_byte and sleeps E/16 at a time (at most kLongestExpectedSleep)
  // until something completes, where the back-off bounded by 1/16 of the time waited would wake
  // it about 80 times on its way to the end. Only for waits whose bytes all arrive over that
  // link (a ring's receives): a send's bytes leave through this rank's own progress calls.
  double seconds_per_byte = 0;
};

// The longest sleep of a wait with an expected length (WaitPolicy::seconds_per_byte).
constexpr std::chrono::microseconds kLongestExpectedSleep{50000};

// The least time a kSleep wait for `bytes` can take under `policy` (bytes * seconds_per_byte,
// at most 16 * kLongestExpectedSleep); 0 where nothing is known, in other modes, or for a
// value of seconds_per_byte that is not positive.
std::chrono::microseconds expected_wait(size_t bytes, const WaitPolicy& policy);

// `policy` for waits on point-to-point requests only: one test per wake-up.
inline WaitPolicy point_to_point(WaitPolicy policy) {
  policy.poll_burst = 1;
  return policy;
}

// "sleep", "yield", "busy" <-> WaitMode (names in that order, the default first); parse throws
// arcreduce::Error naming the value.
WaitMode parse_wait_mode(const std::string& name);
const char* wait_mode_name(WaitMode mode);
const std::vector<std::string>& wait_mode_names();

// Completes all `count` requests (MPI_REQUEST_NULL entries are ignored) under `policy`.
// `statuses` is MPI_STATUSES_IGNORE or holds `count` entries. `bytes`: what the wait moves (the
// message size class of policy.history). Throws arcreduce::Error on MPI failure, like
// ARC_MPI_CHECK, and CommunicationTimeout after `policy.timeout` without progress (the requests
// are then left posted).
void wait_requests(MPI_Request* requests, int count, MPI_Status* statuses, const WaitPolicy& policy,
                   size_t bytes = 0);
inline void wait_request(MPI_Request* request, MPI_Status* status, const WaitPolicy& policy,
                         size_t bytes = 0) {
  wait_requests(request, 1, status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status, policy,
                bytes);
}

// The polling loop of wait_requests, apart from MPI and the clock, so that tests drive it with
// scripted completions and a clock of their own. wait_requests binds the hooks to MPI_Test(some),
// steady_clock, sleep_for and sched_yield.
struct WaitLoopHooks {
  using TimePoint = std::chrono::steady_clock::time_point;
  // Tests the requests once: true when every one is done; sets *progressed (never clears it)
  // when some of them completed in this test.
  std::function<bool(bool* progressed)> poll;
  std::function<TimePoint()> now;
  std::function<void(std::chrono::microseconds)> sleep;
  std::function<void()> yield;
  std::function<void()> timeout;  // throws: no progress for policy.timeout
};
// Polls through `hooks` until poll() says done, as policy.mode says (policy.mode kBusy with a
// timeout polls without pause), polling without sleeps for `spin` first under kSleep. `expected`:
// the least time the wait can take (WaitPolicy::seconds_per_byte), 0 where unknown.
void run_wait_loop(const WaitPolicy& policy, std::chrono::microseconds spin,
                   const WaitLoopHooks& hooks,
                   std::chrono::microseconds expected = std::chrono::microseconds(0));

// Makes this thread's sleeps as short as asked (Linux rounds every sleep up by the thread's
// timer slack, 50 us by default, which would turn the 10 us first sleep into 60 us). Call once
// on the thread that waits; a no-op elsewhere.
void tighten_timer_slack();

// Asks the scheduler for a short time slice for this thread (sched_setattr with sched_runtime,
// honoured for SCHED_OTHER threads since Linux 6.12's EEVDF scheduler): a thread that sleeps
// while it waits is then run as soon as it wakes, instead of after the busy thread's slice
// (about 3 ms on 2 cores). Needs no privilege. Returns false where the kernel refuses it
// (older kernels), which only makes wake-ups slower.
bool request_short_slice(std::chrono::microseconds slice);

}  // namespace arcreduce
