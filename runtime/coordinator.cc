#include "runtime/coordinator.h"

#include <time.h>

#include <chrono>

#include "ops/mpi_wait.h"
#include "tensor_queue/fusion.h"

namespace arcreduce {
namespace {
// While no rank has anything in flight the cycle slows down to this, so idle ranks do not spin
// in MPI; a local submission still wakes the coordinator at once.
constexpr std::chrono::milliseconds kIdleCycle(50);
// Time other ranks get to fail their ops and log a stall shutdown before rank 0 aborts the job.
constexpr std::chrono::milliseconds kAbortGrace(500);

double thread_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

Coordinator::Coordinator(Context& ctx, TensorQueue& queue, StateStore& state)
    : ctx_(ctx), queue_(queue), controller_(ctx), executor_(ctx, state) {
  stats_.rank = ctx.rank;
  published_.rank = ctx.rank;
  if (ctx.rank == 0 && !ctx.config.timeline.empty()) {
    // A file that cannot be written must not stop training: say so and run without it.
    std::string error;
    timeline_ = Timeline::open(ctx.config.timeline, &error);
    if (!timeline_) ctx.log->error("ARCREDUCE_TIMELINE: {}; running without a timeline", error);
  }
  executor_.phases().enable(timeline_ != nullptr);
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
  stats_.collectives = t.calls;
  stats_.coordinator_cpu_seconds = thread_cpu_seconds();
  std::lock_guard<std::mutex> lock(stats_mutex_);
  published_ = stats_;
}

void Coordinator::loop() {
  const auto cycle =
      std::chrono::microseconds(static_cast<int64_t>(ctx_.config.cycle_time_ms * 1000.0));
  bool busy = false;
  tighten_timer_slack();
  if (ctx_.config.wait_mode != "busy") request_short_slice(std::chrono::microseconds(100));
  try {
    while (true) {
      complete_device_buckets(false);
      // A rank whose submissions wait for other ranks cycles at the cycle time; its cycles block
      // (without spinning) until the others join. A rank with nothing waiting joins the next
      // cycle when its own next submission arrives: cycles in which it would report nothing new
      // only add synchronous rounds. The idle cycle still bounds how long the others wait for
      // it, so stall reports and shutdown go through.
      const bool cycle_now = (busy && controller_.has_pending()) || !device_buckets_.empty();
      queue_.wait_for_work(cycle_now ? cycle : std::chrono::microseconds(kIdleCycle));
      std::vector<Request> requests = queue_.take_new_requests();
      auto t = std::chrono::steady_clock::now();
      if (timeline_) {
        for (const Request& r : requests) requested_[r.name] = t;
      }
      const uint64_t calls_before = ctx_.comm->traffic().calls;
      CyclePlan plan = controller_.run_cycle(requests, shutdown_requested_.load(), stats_);
      stats_.negotiation_collectives += ctx_.comm->traffic().calls - calls_before;
      const Clock::time_point negotiated = Clock::now();
      stats_.negotiation_seconds += std::chrono::duration<double>(negotiated - t).count();
      busy = plan.busy;
      if (plan.shutdown || !plan.abort_reason.empty()) complete_device_buckets(true);
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
        if (timeline_) {
          timeline_->instant("[runtime]", "abort", Clock::now(),
                             "\"reason\":" + json_string(plan.abort_reason));
          timeline_->flush();
        }
        ctx_.log->flush();
        if (ctx_.rank == 0) {
          std::this_thread::sleep_for(kAbortGrace);
          ctx_.comm->abort(1, plan.abort_reason);
        }
        break;
      }
      execute(plan, negotiated);
      publish();
      if (timeline_) timeline_->flush();
    }
  } catch (const std::exception& e) {
    std::string message = std::string("arcreduce coordinator failed: ") + e.what();
    ctx_.log->error("{}", message);
    complete_device_buckets(true);
    queue_.close(Status(StatusCode::kInternal, message));
    if (timeline_) {
      timeline_->instant("[runtime]", "coordinator failed", Clock::now(),
                         "\"error\":" + json_string(e.what()));
    }
  }
  publish();
  if (timeline_) timeline_->flush();
}

void Coordinator::complete_device_buckets(bool wait) {
  while (!device_buckets_.empty()) {
    DeviceBucket& bucket = device_buckets_.front();
    Status status = Status::OK();
    try {
      if (wait) {
        bucket.done->wait();
      } else if (!bucket.done->ready()) {
        return;
      }
    } catch (const std::exception& e) {
      status = Status(StatusCode::kInternal, std::string("CUDA device work failed: ") + e.what());
      ctx_.log->error("{}", status.message());
    }
    for (TensorEntry& entry : bucket.entries) queue_.complete(entry, status);
    device_buckets_.pop_front();
  }
}

void Coordinator::record_waiting(const TensorEntry& entry, Clock::time_point negotiated) {
  auto it = requested_.find(entry.name);
  const Clock::time_point requested = it == requested_.end() ? entry.submitted : it->second;
  if (it != requested_.end()) requested_.erase(it);
  timeline_->span(entry.name, "queued", "queue", entry.submitted, requested);
  timeline_->span(entry.name, "negotiated", "negotiate", requested, negotiated);
}

void Coordinator::record_bucket(size_t position, const std::vector<TensorEntry*>& members,
                                const TensorSignature& signature, Clock::time_point negotiated,
                                Clock::time_point begin, Clock::time_point end) {
  const PhaseLog& log = executor_.phases();
  // "fused" runs from readiness to the first phase that is not the bucket's own fusing.
  Clock::time_point fused_end = begin;
  for (const PhaseLog::Phase& p : log.phases()) {
    if (std::string(p.category) != "fuse") break;
    fused_end = p.end;
  }
  const std::string bucket_row = "[bucket " + std::to_string(position) + "]";
  std::string names;
  size_t bytes = 0;
  for (const TensorEntry* e : members) {
    names += (names.empty() ? "" : ",") + json_string(e->name);
    bytes += static_cast<size_t>(e->signature.elements()) * dtype_size(e->signature.dtype);
  }
  const std::string compressor = json_string(signature.compression.compressor);
  timeline_->span(bucket_row, "bucket", "bucket", begin, end,
                  "\"compressor\":" + compressor + ",\"bytes\":" + std::to_string(bytes) +
                      ",\"tensors\":[" + names + "]");
  timeline_->phases(bucket_row, log);
  for (const TensorEntry* e : members) {
    record_waiting(*e, negotiated);
    const char* collective = collective_name(signature.collective);
    timeline_->span(e->name, collective, collective, negotiated, end,
                    "\"compressor\":" + compressor + ",\"bucket\":" + std::to_string(position));
    timeline_->span(e->name, "fused", "fuse", negotiated, fused_end);
    for (const PhaseLog::Phase& p : log.phases()) {
      if (p.begin >= fused_end) timeline_->span(e->name, p.name, p.category, p.begin, p.end);
    }
  }
}

void Coordinator::execute(const CyclePlan& plan, Clock::time_point negotiated) {
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
      if (timeline_) {
        record_waiting(entry, negotiated);
        timeline_->instant(entry.name, "error", negotiated, "\"error\":" + json_string(resp.error));
      }
      queue_.complete(entry, Status(resp.code, resp.error));
      continue;
    }
    entries.push_back(std::move(entry));
    signatures.push_back(resp.signature);
  }
  std::vector<bool> done(entries.size(), false);
  try {
    size_t position = 0;
    for (const Bucket& bucket : plan_buckets(signatures, ctx_.config.fusion_threshold)) {
      std::vector<TensorEntry*> members;
      for (size_t i : bucket.members) members.push_back(&entries[i]);
      const Clock::time_point begin = Clock::now();
      std::unique_ptr<DeviceCompletion> pending =
          executor_.run(members, signatures[bucket.members[0]], stats_);
      const Clock::time_point end = Clock::now();
      if (timeline_) {
        record_bucket(position, members, signatures[bucket.members[0]], negotiated, begin, end);
      }
      ++position;
      publish();  // counters first: a synchronize() that returns sees this bucket counted
      if (pending) {
        // The callbacks fire when the device has finished (complete_device_buckets).
        DeviceBucket device_bucket;
        for (size_t i : bucket.members) {
          done[i] = true;
          device_bucket.entries.push_back(std::move(entries[i]));
        }
        device_bucket.done = std::move(pending);
        device_buckets_.push_back(std::move(device_bucket));
        continue;
      }
      for (size_t i : bucket.members) {
        done[i] = true;
        const Clock::time_point callback = Clock::now();
        const std::string name = timeline_ ? entries[i].name : std::string();
        const Clock::time_point returned = queue_.complete(entries[i], Status::OK());
        if (timeline_) timeline_->span(name, "callback", "callback", callback, returned);
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
