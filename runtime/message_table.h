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

  // Records `rank`'s request. Returns the tensor's Response (kOk or kMismatch) once every rank
  // has submitted it, and forgets the tensor.
  std::optional<Response> add(int rank, const Request& request, Clock::time_point now);

  bool empty() const { return pending_.empty(); }

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
    Clock::time_point first_seen;
    bool warned = false;
  };
  Response validate(const std::string& name, const Pending& pending) const;
  std::string describe_missing(const std::string& name, const Pending& p,
                               Clock::time_point now) const;

  int world_size_;
  std::map<std::string, Pending> pending_;
};

}  // namespace arcreduce
