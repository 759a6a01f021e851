#include "runtime/coordinator.h"

#include <chrono>

#include "tensor_queue/fusion.h"

namespace arcreduce {
namespace {
// While no rank has anything in flight the cycle slows down to this, so idle ranks do not spin
// in MPI; a local submission still wakes the coordinator at once.
constexpr std::chrono::milliseconds kIdleCycle(50);
// Time other ranks get to fail their ops and log a stall shutdown before rank 0 aborts the job.
constexpr std::chrono::milliseconds kAbortGrace(500);
}  // namespace

Coordinator::Coordinator(Context& ctx, TensorQueue& queue, StateStore& state)
    : ctx_(ctx), queue_(queue), controller_(ctx), executor_(ctx, state) {
  stats_.rank = ctx.rank;
  published_.rank = ctx.rank;
}

Coordinator::~Coordinator() {
  shutdown();
}

void Coordinator::start() {
  thread_ = std::thread([this] { loop(); });
}

void Coordinator::shutdown() {
  shutdown_requested_ = true;
  queue_.wake();
  if (thread_.joinable()) thread_.join();
}

Stats Coordinator::stats() const {
  Stats s;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    s = published_;
  }
  s.ops_completed = queue_.completed_ok();
  s.ops_failed = queue_.completed_failed();
  return s;
}

void Coordinator::publish() {
  TrafficCounters t = ctx_.comm->traffic();
  stats_.bytes_sent = t.bytes_sent;
  stats_.bytes_received = t.bytes_received;
  std::lock_guard<std::mutex> lock(stats_mutex_);
  published_ = stats_;
}

void Coordinator::loop() {
  const auto cycle =
      std::chrono::microseconds(static_cast<int64_t>(ctx_.config.cycle_time_ms * 1000.0));
  bool busy = false;
  try {
    while (true) {
      queue_.wait_for_work(busy ? cycle : std::chrono::microseconds(kIdleCycle));
      std::vector<Request> requests = queue_.take_new_requests();
      auto t = std::chrono::steady_clock::now();
      CyclePlan plan = controller_.run_cycle(requests, shutdown_requested_.load(), stats_);
      stats_.negotiation_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
      busy = plan.busy;
      if (plan.shutdown) {
        ctx_.log->debug("shutting down: shutdown() was called on some rank");
        queue_.close(Status(StatusCode::kShutdown,
                            "arcreduce was shut down (shutdown() called on some rank) before "
                            "this op completed"));
        break;
      }
      if (!plan.abort_reason.empty()) {
        // Every rank learnt the reason in the same broadcast: each fails its own ops and logs;
        // rank 0 then ends the job after a grace period that lets the others report.
        ctx_.log->error("{}; aborting the job", plan.abort_reason);
        queue_.close(Status(StatusCode::kStalled, plan.abort_reason));
        publish();
        ctx_.log->flush();
        if (ctx_.rank == 0) {
          std::this_thread::sleep_for(kAbortGrace);
          ctx_.comm->abort(1, plan.abort_reason);
        }
        break;
      }
      execute(plan);
      publish();
    }
  } catch (const std::exception& e) {
    std::string message = std::string("arcreduce coordinator failed: ") + e.what();
    ctx_.log->error("{}", message);
    queue_.close(Status(StatusCode::kInternal, message));
  }
  publish();
}

void Coordinator::execute(const CyclePlan& plan) {
  std::vector<TensorEntry> entries;
  std::vector<TensorSignature> signatures;
  entries.reserve(plan.responses.size());
  for (const Response& resp : plan.responses) {
    TensorEntry entry;
    if (!queue_.take_entry(resp.name, &entry)) {
      throw Error("negotiated tensor '" + resp.name + "' is not in flight on this rank",
                  StatusCode::kInternal);
    }
    if (resp.code != StatusCode::kOk) {
      ctx_.log->error("{}", resp.error);
      queue_.complete(entry, Status(resp.code, resp.error));
      continue;
    }
    entries.push_back(std::move(entry));
    signatures.push_back(resp.signature);
  }
  std::vector<bool> done(entries.size(), false);
  try {
    for (const Bucket& bucket : plan_buckets(signatures, ctx_.config.fusion_threshold)) {
      std::vector<TensorEntry*> members;
      for (size_t i : bucket.members) members.push_back(&entries[i]);
      executor_.run(members, signatures[bucket.members[0]], stats_);
      publish();  // counters first: a synchronize() that returns sees this bucket counted
      for (size_t i : bucket.members) {
        done[i] = true;
        queue_.complete(entries[i], Status::OK());
      }
    }
  } catch (const std::exception& e) {
    // Ops taken out of the queue are not reachable by close(): fail them here.
    Status failed(StatusCode::kInternal, std::string("arcreduce coordinator failed: ") + e.what());
    for (size_t i = 0; i < entries.size(); ++i) {
      if (done[i]) continue;
      queue_.complete(entries[i], failed);
    }
    throw;
  }
}

}  // namespace arcreduce
