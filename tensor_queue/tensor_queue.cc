#include "tensor_queue/tensor_queue.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace arcreduce {
namespace {
// Completed handles kept for a later synchronize(); beyond this the oldest are released (a
// program that only uses callbacks never synchronizes).
constexpr size_t kMaxUnsynchronizedHandles = 1 << 16;

// Handles are unique for the life of the process, not per queue: after shutdown(); init(), a
// handle of the retired runtime's queue must not name an op of the new one (its synchronize()
// would return another op's status).
std::atomic<Handle> g_next_handle{1};

thread_local int t_callback_depth = 0;

void run_callback(std::function<void(const Status&)>& callback, const Status& status) {
  if (!callback) return;
  ++t_callback_depth;
  try {
    callback(status);
  } catch (...) {
    // Callbacks run on the coordinator thread, which must never die: swallow, the op's own
    // Status is still delivered through synchronize().
  }
  --t_callback_depth;
}
}  // namespace

bool in_completion_callback() {
  return t_callback_depth > 0;
}

Handle TensorQueue::submit(TensorEntry entry) {
  Status reject_status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Handle h = g_next_handle.fetch_add(1);
    handles_[h];
    entry.handle = h;
    if (closed_) {
      reject_status = Status(closed_status_.code(),
                             "tensor '" + entry.name + "' was submitted after arcreduce stopped: " +
                                 closed_status_.message());
    } else if (in_flight_.count(entry.name)) {
      reject_status = Status(StatusCode::kDuplicateName,
                             "tensor '" + entry.name +
                                 "' is already in flight on this rank: names must be unique "
                                 "among in-flight ops");
    } else {
      bool silent = false;
      if (silent_.erase(entry.name)) {
        silent = !silent_.empty();
        awaited_arrived_ = !silent;
      }
      new_requests_.push_back(Request{entry.name, entry.signature, 0.0});
      in_flight_.emplace(entry.name, std::move(entry));
      if (!silent) {
        ++submission_wakeups_;
        work_cv_.notify_one();
      }
      return h;
    }
  }
  finish(entry.handle, entry.callback, reject_status);
  return entry.handle;
}

Handle TensorQueue::reject(std::function<void(const Status&)> callback, const Status& status) {
  Handle h;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    h = g_next_handle.fetch_add(1);
    handles_[h];
  }
  finish(h, callback, status);
  return h;
}

Handle TensorQueue::refuse(const std::string& name, const TensorSignature& signature,
                           std::function<void(const Status&)> callback, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_ && !name.empty() && !in_flight_.count(name)) {
      Request request{name, signature, 0.0, status.message()};
      if (request.refusal.empty()) request.refusal = "refused";
      new_requests_.push_back(std::move(request));
      ++submission_wakeups_;
      work_cv_.notify_one();
    }
  }
  return reject(std::move(callback), status);
}

void TensorQueue::wait_for_work(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  work_cv_.wait_for(lock, timeout,
                    [&] { return !new_requests_.empty() || closed_ || woken_ || waited_; });
  woken_ = false;
}

void TensorQueue::wait_for_quiet(std::chrono::microseconds gap, std::chrono::microseconds limit) {
  if (gap.count() <= 0 || limit.count() <= 0) return;
  const Clock::time_point until = Clock::now() + limit;
  std::unique_lock<std::mutex> lock(mutex_);
  if (awaited_arrived_) return;  // the held step is complete: nothing more to wait for
  while (!new_requests_.empty() && !closed_ && !woken_ && !waited_) {
    const size_t seen = new_requests_.size();
    const Clock::time_point deadline = std::min(until, Clock::now() + gap);
    const bool more = work_cv_.wait_until(lock, deadline, [&] {
      return new_requests_.size() != seen || closed_ || woken_ || waited_;
    });
    if (!more || Clock::now() >= until) return;
  }
}

std::vector<Request> TensorQueue::take_new_requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Request> out;
  out.swap(new_requests_);
  auto now = Clock::now();
  for (Request& r : out) {
    auto it = in_flight_.find(r.name);
    if (it != in_flight_.end()) {
      r.age_seconds = std::chrono::duration<double>(now - it->second.submitted).count();
    }
  }
  return out;
}

std::vector<std::string> TensorQueue::in_flight_names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  names.reserve(in_flight_.size());
  for (const auto& kv : in_flight_) names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  return names;
}

bool TensorQueue::has_in_flight(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_.count(name) > 0;
}

bool TensorQueue::take_entry(const std::string& name, TensorEntry* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(name);
  if (it == in_flight_.end()) return false;
  *out = std::move(it->second);
  in_flight_.erase(it);
  return true;
}

Clock::time_point TensorQueue::complete(TensorEntry& entry, const Status& status) {
  // Handle 0: an entry the coordinator made itself (a joined rank's zeros), nobody waits on it.
  if (entry.handle == 0) return Clock::now();
  return finish(entry.handle, entry.callback, status);
}

void TensorQueue::close(const Status& status) {
  std::unordered_map<std::string, TensorEntry> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_) {
      closed_ = true;
      closed_status_ = status;
    }
    pending.swap(in_flight_);
    new_requests_.clear();
    work_cv_.notify_all();
  }
  for (auto& kv : pending) finish(kv.second.handle, kv.second.callback, status);
}

bool TensorQueue::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

bool TensorQueue::take_waited() {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool waited = waited_;
  waited_ = false;
  return waited;
}

void TensorQueue::set_silent(std::unordered_set<std::string> names) {
  std::lock_guard<std::mutex> lock(mutex_);
  silent_ = std::move(names);
  awaited_arrived_ = false;
}

uint64_t TensorQueue::submission_wakeups() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return submission_wakeups_;
}

void TensorQueue::wake() {
  std::lock_guard<std::mutex> lock(mutex_);
  woken_ = true;
  work_cv_.notify_all();
}

uint64_t TensorQueue::completed_ok() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ok_;
}

uint64_t TensorQueue::completed_failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_failed_;
}

bool TensorQueue::poll(Handle handle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = handles_.find(handle);
  return it == handles_.end() || it->second.done;
}

Status TensorQueue::synchronize(Handle handle) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) {
    return Status(StatusCode::kInvalidArgument,
                  "handle " + std::to_string(handle) +
                      " is unknown or was already released by synchronize()");
  }
  if (!it->second.done && !waited_) {
    // Someone blocks on an op: the coordinator must not hold anything back for a later batch.
    waited_ = true;
    work_cv_.notify_all();
  }
  done_cv_.wait(lock, [&] {
    auto found = handles_.find(handle);
    return found == handles_.end() || found->second.done;
  });
  it = handles_.find(handle);
  if (it == handles_.end()) {
    return Status(StatusCode::kInvalidArgument,
                  "handle " + std::to_string(handle) + " was released before synchronize()");
  }
  Status status = it->second.status;
  handles_.erase(it);
  return status;
}

Clock::time_point TensorQueue::finish(Handle handle, std::function<void(const Status&)>& callback,
                                      const Status& status) {
  run_callback(callback, status);
  const Clock::time_point returned = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  ++(status.ok() ? completed_ok_ : completed_failed_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return returned;
  it->second.done = true;
  it->second.status = status;
  unsynchronized_done_.push_back(handle);
  while (unsynchronized_done_.size() > kMaxUnsynchronizedHandles) {
    handles_.erase(unsynchronized_done_.front());  // no-op if already synchronized
    unsynchronized_done_.pop_front();
  }
  done_cv_.notify_all();
  return returned;
}

}  // namespace arcreduce
