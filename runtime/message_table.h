// MessageTable (rank 0 only): requests of tensors that not every rank has submitted yet, the
// validation of complete ones, and the stall inspector's view of what is missing from whom.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensor_queue/message.h"

namespace arcreduce {

class MessageTable {
 public:
  using Clock = std::chrono::steady_clock;

  explicit MessageTable(int world_size) : world_size_(world_size) {}

  // Records `rank`'s request. Appends the tensor's Response (kOk, kMismatch, or kInvalidArgument
  // where some rank refused it) to `out` once every rank has submitted or refused it, and forgets
  // it. A second request of `rank` for a tensor still waiting (a refusal fails at once on its
  // rank, which may submit the name again before the others met the refusal) waits its turn: it
  // counts for the next op of that name.
  void add(int rank, const Request& request, Clock::time_point now, std::vector<Response>* out);

  bool empty() const { return pending_.empty(); }
  // Whether some tensor has an op waiting for other ranks (refusals alone do not count: no
  // rank waits on them).
  bool waiting() const;

  // join(): a rank whose join request (Collective::kJoin under kJoinName) is here has joined. It
  // counts as present for every other tensor: an allreduce completes without it (it takes part
  // with zeros), any other collective fails, naming it. The join completes when every rank has
  // joined; its response's root_rank is the rank that joined last.

  struct StallReport {
    std::string warning;  // non-empty: tensors waiting longer than check_seconds (new ones only)
    std::string abort;    // non-empty: some tensor waited longer than shutdown_seconds
  };
  // 0 disables the respective check.
  StallReport inspect(Clock::time_point now, double check_seconds, double shutdown_seconds);

 private:
  struct Pending {
    std::vector<std::optional<Request>> by_rank;
    int count = 0;
    int refusals = 0;  // requests that are refusals; == count: no rank waits on this tensor
    std::vector<std::pair<int, Request>> later;  // ranks' next requests of the name, in order
    Clock::time_point first_seen;
    bool warned = false;
  };
  Response validate(const std::string& name, const Pending& pending) const;
  // Whether every rank has submitted `p` or joined.
  bool complete(const Pending& p) const;
  // The response of a complete tensor some joined rank did not submit.
  Response validate_with_joined(const std::string& name, Pending p) const;
  // Completes the tensors a newly joined rank was the last one missing from.
  void complete_for_joined(Clock::time_point now, std::vector<Response>* out);
  // Forgets the completed `it` and adds the requests that waited behind it.
  void requeue_later(std::map<std::string, Pending>::iterator it, Clock::time_point now,
                     std::vector<Response>* out);
  std::string describe_missing(const std::string& name, const Pending& p,
                               Clock::time_point now) const;

  int world_size_;
  std::map<std::string, Pending> pending_;
  std::vector<bool> joined_ = std::vector<bool>(static_cast<size_t>(world_size_), false);
  int joined_count_ = 0;  // ranks set in joined_
};

}  // namespace arcreduce
