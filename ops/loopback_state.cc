#include "ops/loopback_state.h"

#include <exception>

#include "arcreduce/status.h"

namespace arcreduce {

LoopbackState::LoopbackState(int size, int ranks_per_host, std::chrono::milliseconds timeout,
                             Hierarchy hierarchy)
    : size_(size),
      ranks_per_host_(ranks_per_host),
      hierarchy_(hierarchy),
      timeout_(timeout),
      slots_(size),
      present_(size, false) {}

void LoopbackState::wait(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready,
                         const std::function<std::string()>& describe) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const bool done = changed_.wait_until(lock, deadline, [&] { return failed_ || ready(); });
  if (!done) {
    fail_locked(describe() + ": no progress after " + std::to_string(timeout_.count()) + " ms");
  }
  if (failed_) throw_failure();
}

void LoopbackState::throw_failure() const {
  throw Error("loopback world failed: " + failure_, StatusCode::kInternal);
}

void LoopbackState::fail_locked(const std::string& reason) {
  if (!failed_) {
    failed_ = true;
    failure_ = reason;
  }
  changed_.notify_all();
}

void LoopbackState::collective(int rank, Contribution mine, const Combine& combine,
                               const Read& read) {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::string signature = mine.signature;
  wait(
      lock, [&] { return !complete_; },
      [&] {
        return "rank " + std::to_string(rank) + " entering " + signature +
               " while the previous collective is still being read";
      });
  slots_[rank] = std::move(mine);
  present_[rank] = true;
  if (++arrived_ == size_) {
    for (int r = 1; r < size_; ++r) {
      if (slots_[r].signature != slots_[0].signature) {
        fail_locked("collective mismatch: rank 0 called " + slots_[0].signature + ", rank " +
                    std::to_string(r) + " called " + slots_[r].signature);
        throw_failure();
      }
    }
    try {
      combine(slots_, &result_);
    } catch (const std::exception& e) {
      fail_locked(e.what());
      throw_failure();
    }
    complete_ = true;
    changed_.notify_all();
  } else {
    wait(
        lock, [&] { return complete_; },
        [&] {
          std::string missing;
          for (int r = 0; r < size_; ++r) {
            if (!present_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
          }
          return "rank " + std::to_string(rank) + " in " + signature + " waiting for rank(s) " +
                 missing;
        });
  }
  lock.unlock();
  // Slots and result stay frozen until every rank has departed.
  std::exception_ptr read_error;
  try {
    read(slots_, result_);
  } catch (...) {
    read_error = std::current_exception();
  }
  lock.lock();
  if (++departed_ == size_) {
    for (int r = 0; r < size_; ++r) {
      slots_[r] = Contribution();
      present_[r] = false;
    }
    result_.clear();
    result_.shrink_to_fit();
    arrived_ = departed_ = 0;
    complete_ = false;
    changed_.notify_all();
  }
  if (read_error) std::rethrow_exception(read_error);
}

void LoopbackState::post(int src, int dst, int tag, std::vector<char> message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) throw_failure();
  mailboxes_[{src, dst, tag}].push_back(std::move(message));
  changed_.notify_all();
}

std::vector<char> LoopbackState::take(int src, int dst, int tag) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto& box = mailboxes_[{src, dst, tag}];
  wait(
      lock, [&] { return !box.empty(); },
      [&] {
        return "rank " + std::to_string(dst) + " in recv(src=" + std::to_string(src) +
               ", tag=" + std::to_string(tag) + ") waiting for a message";
      });
  std::vector<char> message = std::move(box.front());
  box.pop_front();
  return message;
}

void LoopbackState::fail(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_locked(reason);
}

bool LoopbackState::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

std::string LoopbackState::failure_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void LoopbackState::record_abort(int rank, int code, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_) {
    aborted_ = true;
    abort_code_ = code;
    abort_reason_ = reason;
  }
  fail_locked("rank " + std::to_string(rank) + " called abort(" + std::to_string(code) +
              "): " + reason);
}

bool LoopbackState::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

int LoopbackState::abort_code() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return abort_code_;
}

std::string LoopbackState::abort_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return abort_reason_;
}

}  // namespace arcreduce
