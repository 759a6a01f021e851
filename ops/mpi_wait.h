// How the coordinator waits for MPI requests (ARCREDUCE_WAIT_MODE, docs/runtime.md, "Waiting").
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
//           doubling up to `max_sleep`; the sleep drops back to `min_sleep` whenever a request
//           of a multi-request wait completes, so a stream of messages is polled promptly.
// The mode is local to a rank: every mode posts the same non-blocking operations, so ranks with
// different modes still match each other's messages.
#pragma once

#include "ops/mpi_include.h"

#include <chrono>
#include <string>
#include <vector>

namespace arcreduce {

enum class WaitMode { kBusy, kYield, kSleep };

struct WaitPolicy {
  WaitMode mode = WaitMode::kSleep;
  std::chrono::microseconds spin{50};
  std::chrono::microseconds min_sleep{10};
  std::chrono::microseconds max_sleep{200};
};

// "busy", "yield", "sleep" <-> WaitMode; parse throws arcreduce::Error naming the value.
WaitMode parse_wait_mode(const std::string& name);
const char* wait_mode_name(WaitMode mode);
const std::vector<std::string>& wait_mode_names();

// Completes all `count` requests (MPI_REQUEST_NULL entries are ignored) under `policy`.
// `statuses` is MPI_STATUSES_IGNORE or holds `count` entries. Throws arcreduce::Error on MPI
// failure, like ARC_MPI_CHECK.
void wait_requests(MPI_Request* requests, int count, MPI_Status* statuses,
                   const WaitPolicy& policy);
inline void wait_request(MPI_Request* request, MPI_Status* status, const WaitPolicy& policy) {
  wait_requests(request, 1, status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status, policy);
}

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
