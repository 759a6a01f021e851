// Shared state of a LoopbackWorld: the collective rendezvous and the point-to-point mailboxes.
// Internal to ops/loopback_communicator.cc; see loopback_communicator.h for the semantics.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/allreduce_algorithm.h"

namespace arcreduce {

// One rank's part of a collective. `signature` names the call and every argument that must
// agree across ranks; `data` is a snapshot of the rank's input, so no rank ever reads another
// rank's live buffer and in-place calls are safe.
struct Contribution {
  Contribution() = default;
  explicit Contribution(std::string signature_, std::vector<char> data_ = {},
                        std::vector<size_t> send_bytes_ = {}, std::vector<size_t> recv_bytes_ = {})
      : signature(std::move(signature_)),
        data(std::move(data_)),
        send_bytes(std::move(send_bytes_)),
        recv_bytes(std::move(recv_bytes_)) {}

  std::string signature;
  std::vector<char> data;
  std::vector<size_t> send_bytes;  // alltoallv only
  std::vector<size_t> recv_bytes;  // alltoallv only
};

class LoopbackState {
 public:
  // Runs by the last rank to arrive, under the lock; may fill `result` or throw Error (which
  // fails the world).
  using Combine = std::function<void(const std::vector<Contribution>&, std::vector<char>* result)>;
  // Runs on every rank without the lock once all inputs are frozen.
  using Read = std::function<void(const std::vector<Contribution>&, const std::vector<char>&)>;

  LoopbackState(int size, int ranks_per_host, std::chrono::milliseconds timeout,
                Hierarchy hierarchy = Hierarchy::kOff);

  int size() const { return size_; }
  int ranks_per_host() const { return ranks_per_host_; }
  Hierarchy hierarchy() const { return hierarchy_; }

  void collective(int rank, Contribution mine, const Combine& combine, const Read& read);
  void post(int src, int dst, int tag, std::vector<char> message);
  std::vector<char> take(int src, int dst, int tag);

  void fail(const std::string& reason);
  bool failed() const;
  std::string failure_reason() const;
  void record_abort(int rank, int code, const std::string& reason);
  bool aborted() const;
  int abort_code() const;
  std::string abort_reason() const;

 private:
  // Waits until `ready` holds; throws Error when the world fails or the timeout passes (which
  // fails the world with a message built by `describe`).
  void wait(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready,
            const std::function<std::string()>& describe);
  void fail_locked(const std::string& reason);
  [[noreturn]] void throw_failure() const;

  const int size_;
  const int ranks_per_host_;
  const Hierarchy hierarchy_;
  const std::chrono::milliseconds timeout_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool failed_ = false;
  std::string failure_;
  bool aborted_ = false;
  int abort_code_ = 0;
  std::string abort_reason_;

  // Collective in progress: ranks arrive, the last one sets `complete_`, ranks depart; the next
  // collective may start only after every rank departed (complete_ back to false).
  std::vector<Contribution> slots_;
  std::vector<bool> present_;
  std::vector<char> result_;
  int arrived_ = 0;
  int departed_ = 0;
  bool complete_ = false;

  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mailboxes_;
};

}  // namespace arcreduce
