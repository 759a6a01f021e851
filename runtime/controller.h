// Controller: one negotiation cycle, run by the coordinator thread of every rank in lockstep.
//
// Per cycle, every rank:
//  1. sorts its new requests into cached (the response cache holds the same signature: only a
//     bit is sent) and uncached (sent to rank 0 in full);
//  2. takes part in one bitwise-AND All-Reduce of [flags | ready bits | inverted invalid bits]
//     (flags are inverted too, so AND computes "any rank" for them);
//  3. drops invalidated cache slots everywhere (a signature changed, or a cached tensor waited
//     long enough that rank 0 should see who is missing);
//  4. if any rank has uncached requests or refusals (or rank 0 must report a stall), gathers
//     request lists at rank 0, which validates complete tensors and broadcasts the responses
//     (a tensor refused on some rank fails on every rank);
//  5. returns cached-ready responses (slot order) followed by rank 0's (its order): the same
//     list on every rank, so execution and cache updates happen in the same order everywhere.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "arcreduce/stats.h"
#include "runtime/context.h"
#include "runtime/message_table.h"
#include "runtime/response_cache.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

struct CyclePlan {
  std::vector<Response> responses;  // execution order, identical on every rank
  bool shutdown = false;            // some rank called shutdown(): stop after this cycle
  std::string abort_reason;         // stall shutdown: fail everything and end the job
  bool busy = false;                // some rank had tensors in flight at the start of the cycle
  bool every_rank_agrees = false;   // every rank passed agree = true to this cycle
};

class Controller {
 public:
  explicit Controller(Context& ctx);

  // `agree`: this rank's vote, ANDed over the ranks into the plan's every_rank_agrees (one bit
  // of the negotiation every cycle carries anyway; BatchingTrial uses it to decide together).
  CyclePlan run_cycle(const std::vector<Request>& new_requests, bool shutdown_requested, bool agree,
                      Stats& stats);
  // Whether this rank has submitted tensors that are not yet ready on every rank.
  bool has_pending() const { return !pending_.empty(); }
  // Whether this rank has joined (its join() is being negotiated): it then takes part in the
  // other ranks' allreduces with zeros (Coordinator::execute).
  bool joined() const { return pending_.count(kJoinName) > 0; }

 private:
  struct Pending {
    TensorSignature signature;
    Clock::time_point since;
    int64_t slot = -1;  // cache slot when negotiated through the bit vector
  };
  std::vector<uint64_t> build_bits(bool shutdown_requested, bool abort_due, bool agree,
                                   const std::vector<size_t>& invalid_local) const;
  std::vector<Response> negotiate_at_root(const std::string& abort_reason, std::string* abort_out,
                                          Stats& stats);
  void apply_cache_updates(const std::vector<Response>& responses);

  Context& ctx_;
  ResponseCache cache_;
  MessageTable table_;  // used on rank 0 only
  std::unordered_map<std::string, Pending> pending_;
  std::vector<std::string> unsent_;  // uncached names for the next full negotiation, in order
  std::vector<Request> refusals_;    // this rank's refusals for the next full negotiation
  // Refusals of this rank whose response has not come yet, per name. That response (an error)
  // is not an op of this rank: it is dropped, while an op of the same name submitted after the
  // refusal stays pending for the name's next round (MessageTable::add).
  std::unordered_map<std::string, int> refused_;
};

}  // namespace arcreduce
