#include "runtime/coordinator.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <iterator>

#include "ops/mpi_wait.h"
#include "tensor_queue/fusion.h"

namespace arcreduce {
namespace {
// Time the other ranks get to fail their ops and log the reason before a rank ends the job.
constexpr std::chrono::milliseconds kAbortGrace(500);

// How long a rank whose wait timed out listens for the other ranks' liveness messages: they
// time out in the same collective within about one wait of each other.
std::chrono::milliseconds liveness_grace(double stall_shutdown_seconds) {
  const double ms = std::clamp(stall_shutdown_seconds * 250.0, 1000.0, 10000.0);
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

std::string quoted_list(const std::vector<std::string>& names, size_t limit) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) {
    out += (i ? ", '" : "'") + names[i] + "'";
  }
  if (names.size() > limit) out += " and " + std::to_string(names.size() - limit) + " more";
  return out.empty() ? "none" : out;
}

thread_local bool t_coordinator_thread = false;

StepBatcher::Policy batcher_policy(CompressionChoice::Holding holding) {
  switch (holding) {
    case CompressionChoice::Holding::kNever:
      return StepBatcher::Policy::kNever;
    case CompressionChoice::Holding::kAlways:
      return StepBatcher::Policy::kAlways;
    case CompressionChoice::Holding::kOwn:
      break;
  }
  return StepBatcher::Policy::kOwn;
}

double thread_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

Coordinator::Coordinator(Context& ctx, TensorQueue& queue, StateStore& state)
    : ctx_(ctx),
      queue_(queue),
      state_(state),
      controller_(ctx),
      executor_(ctx, state),
      admission_(ctx.config.batch_compressed, ctx.config.warmup_steps,
                 static_cast<size_t>(ctx.config.min_bucket_bytes)),
      trial_(admission_.batcher()),
      choice_(ctx.config.auto_compress) {
  stats_.rank = ctx.rank;
  published_.rank = ctx.rank;
  if (ctx.rank == 0 && !ctx.config.timeline.empty()) {
    // A file that cannot be written must not stop training: say so and run without it.
    std::string error;
    timeline_ = Timeline::open(ctx.config.timeline, &error);
    if (!timeline_) ctx.log->error("ARCREDUCE_TIMELINE: {}; running without a timeline", error);
  }
  executor_.phases().enable(timeline_ != nullptr);
  if (ctx.rank == 0 && choice_.enabled()) {
    ctx.log->info(
        "ARCREDUCE_AUTO_COMPRESS: tensors that take the job's compression ({}) go {} steps "
        "dense, then {} compressed; compressed from then on only if the dense step is at least "
        "{:.1f}x the compressed one",
        ctx.config.compressor, CompressionChoice::kDenseTrialSteps,
        CompressionChoice::kCompressedTrialSteps, CompressionChoice::kStepsFactor);
  }
}

Coordinator::~Coordinator() {
  shutdown();
}

void Coordinator::start() {
  thread_ = std::thread([this] {
    thread_id_.store(std::this_thread::get_id());
    t_coordinator_thread = true;
    // Named so that `top -H`, `ps -L` and profilers show the runtime's CPU apart from the
    // training thread's (at most 15 characters).
    pthread_setname_np(pthread_self(), "arcreduce-coord");
    loop();
    thread_id_.store(std::thread::id());  // ids of joined threads are reused
  });
}

bool Coordinator::on_any_coordinator_thread() {
  return t_coordinator_thread;
}

void Coordinator::request_shutdown() {
  shutdown_requested_ = true;
  queue_.wake();
}

void Coordinator::shutdown() {
  request_shutdown();
  // From a callback (this thread): the request is made, the loop ends after the agreed round;
  // joining here would wait for itself.
  if (on_coordinator_thread()) return;
  std::lock_guard<std::mutex> lock(join_mutex_);  // two threads may shut down at once
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
  // Read here, not in publish(): building the maps on every bucket would cost the coordinator
  // allocations per bucket for a figure only stats() reads. The communicator's counters are
  // atomics and its link model is fixed at construction, so this thread may read them.
  const CommunicationUsage usage = ctx_.comm->communication_usage();
  s.allreduce_calls = usage.calls;
  s.allreduce_bytes = usage.bytes;
  s.collective_calls = usage.collective_calls;
  s.collective_bytes = usage.collective_bytes;
  s.hosts = usage.hosts;
  s.hierarchical = usage.hierarchical;
  s.link_latency_us = usage.link_latency_seconds * 1e6;
  s.link_mbit_per_s = usage.link_seconds_per_byte > 0 ? 8e-6 / usage.link_seconds_per_byte : 0;
  return s;
}

void Coordinator::publish() {
  stats_.held_steps = admission_.batcher().held_steps();
  stats_.auto_compression = choice_.state();
  stats_.auto_compressed_step_ms = choice_.agreed_compressed_ms();
  stats_.auto_dense_step_ms = choice_.agreed_dense_ms();
  TrafficCounters t = ctx_.comm->traffic();
  stats_.bytes_sent = t.bytes_sent;
  stats_.bytes_received = t.bytes_received;
  stats_.collectives = t.calls;
  stats_.coordinator_cpu_seconds = thread_cpu_seconds();
  std::lock_guard<std::mutex> lock(stats_mutex_);
  published_ = stats_;
}

// One cycle: wait for work, admit, negotiate, execute (as Horovod's RunLoopOnce). Each
// mechanism lives in one place: holding in Admission, the batching decision in BatchingTrial,
// the ranks' agreement in Controller, ending the job in abort_job().
void Coordinator::loop() {
  const auto cycle =
      std::chrono::microseconds(static_cast<int64_t>(ctx_.config.cycle_time_ms * 1000.0));
  const std::chrono::microseconds batch_gap(ctx_.config.batch_gap_us);
  Clock::time_point last_round = Clock::now();
  bool busy = false;
  tighten_timer_slack();
  if (parse_wait_mode(ctx_.config.wait_mode) != WaitMode::kBusy) {
    request_short_slice(std::chrono::microseconds(100));
  }
  try {
    while (true) {
      // 1. Wait. A rank whose submissions wait for other ranks cycles at the cycle time; one with
      // nothing waiting joins the next round when its own next submission arrives (rounds in
      // which it would report nothing only add synchronous rounds), or after the idle cycle,
      // which bounds how long the others wait for it. Tensors produced together (a layer's
      // weight and bias) then get batch_gap to arrive, so that they share a round.
      complete_device_buckets(false);
      const bool cycle_now = (busy && controller_.has_pending()) || !device_buckets_.empty();
      const std::chrono::microseconds idle(Admission::kIdleCycle);
      queue_.wait_for_work(admission_.wait(cycle_now ? cycle : idle, Clock::now()));
      queue_.wait_for_quiet(batch_gap, cycle);

      // 2. Admit.
      const Clock::time_point now = Clock::now();
      // Before the waited flag: an op submitted just before its wait goes out in this cycle.
      std::vector<Request> taken = queue_.take_new_requests();
      const bool release = queue_.take_waited() || shutdown_requested_.load();
      Admission::Admitted admitted = admission_.admit(std::move(taken), now, release);
      if (admitted.silent) queue_.set_silent(*admitted.silent);
      Admission::RoundInputs round;
      round.requests = !admitted.requests.empty();
      round.work_in_flight = controller_.has_pending() || !device_buckets_.empty();
      round.shutdown = shutdown_requested_.load();
      round.since_last_round = now - last_round;
      if (!admission_.round_wanted(round)) continue;
      last_round = now;

      // 3. Negotiate.
      Clock::time_point negotiated;
      const CyclePlan plan = negotiate(admitted.requests, now, &negotiated);
      // The agreement bit is one decision's at a time: ARCREDUCE_AUTO_COMPRESS's first (its
      // pending() changes in the same cycle on every rank), then ARCREDUCE_BATCH_COMPRESSED's.
      const bool choosing = choice_.pending();
      busy = plan.busy;
      if (plan.shutdown) {
        complete_device_buckets(true);
        ctx_.log->debug("shutting down: shutdown() was called on some rank");
        queue_.close(Status(StatusCode::kShutdown,
                            "arcreduce was shut down (shutdown() called on some rank) before "
                            "this op completed"));
        break;
      }
      if (!plan.abort_reason.empty()) {
        // Every rank learnt the reason in the same broadcast: each fails its own ops and logs;
        // rank 0 then ends the job.
        abort_job(plan.abort_reason, ctx_.rank == 0);
        break;
      }
      if (plan.every_rank_agrees && choosing) {
        activity_ = "ARCREDUCE_AUTO_COMPRESS's decision";
        choice_.decide(*ctx_.comm, ctx_.rank, ctx_.size, ctx_.log);
        admission_.batcher().set_policy(batcher_policy(choice_.holding()));
        if (timeline_) {
          timeline_->instant("[runtime]", "auto compression", Clock::now(),
                             fmt::format("\"choice\":\"{}\",\"compressed_ms\":{:.3f},"
                                         "\"dense_ms\":{:.3f}",
                                         choice_.state(), choice_.agreed_compressed_ms(),
                                         choice_.agreed_dense_ms()));
        }
      } else if (plan.every_rank_agrees && trial_.pending()) {
        activity_ = "ARCREDUCE_BATCH_COMPRESSED's decision";
        trial_.decide(*ctx_.comm, ctx_.rank, ctx_.size, ctx_.log);
      }

      // 4. Execute.
      execute(plan, negotiated);
      if (!plan.responses.empty()) admission_.completed(Clock::now());
      publish();
      if (timeline_) timeline_->flush();
    }
  } catch (const CommunicationTimeout& e) {
    // A peer stopped taking part in a collective: the job cannot go on, and the silent rank may
    // be rank 0, so every rank that timed out ends the job itself.
    abort_job(describe_timeout(e), true);
  } catch (const std::exception& e) {
    // One rank's failure (an error raised on this side of a collective only, an allocation
    // failure, a device fault) leaves the others inside a collective that this rank will never
    // join: as NCCL's asynchronous errors abort the communicator, this rank ends the job, so the
    // others stop within the grace period instead of the stall timeout, with this message.
    abort_job(fmt::format("arcreduce coordinator failed on rank {}: {}", ctx_.rank, e.what()), true,
              StatusCode::kInternal);
  }
  publish();
  if (timeline_) timeline_->flush();
}

CyclePlan Coordinator::negotiate(const std::vector<Request>& requests, Clock::time_point now,
                                 Clock::time_point* negotiated) {
  if (timeline_) {
    for (const Request& r : requests) {
      if (r.refusal.empty()) requested_[r.name] = now;
    }
  }
  const uint64_t calls_before = ctx_.comm->traffic().calls;
  activity_ = "negotiation";
  const bool vote = choice_.pending() ? choice_.ready() : trial_.ready();
  CyclePlan plan = controller_.run_cycle(requests, shutdown_requested_.load(), vote, stats_);
  stats_.negotiation_collectives += ctx_.comm->traffic().calls - calls_before;
  *negotiated = Clock::now();
  stats_.negotiation_seconds += std::chrono::duration<double>(*negotiated - now).count();
  return plan;
}

void Coordinator::abort_job(const std::string& reason, bool end_job, StatusCode code) {
  ctx_.log->error("{}; aborting the job", reason);
  try {
    complete_device_buckets(true);
  } catch (const std::exception& e) {
    ctx_.log->error("while aborting: {}", e.what());  // the job ends all the same
  }
  queue_.close(Status(code, reason));
  publish();
  if (timeline_) {
    timeline_->instant("[runtime]", "abort", Clock::now(), "\"reason\":" + json_string(reason));
    timeline_->flush();
  }
  ctx_.log->flush();
  if (!end_job) return;
  // The other ranks get this long to fail their ops and log the reason before the job ends.
  std::this_thread::sleep_for(kAbortGrace);
  ctx_.comm->abort(1, reason);
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

std::string Coordinator::describe_timeout(const std::exception& timeout) {
  if (!timeout_message_.empty()) return timeout_message_;
  const std::chrono::milliseconds grace = liveness_grace(ctx_.config.stall_shutdown_seconds);
  std::vector<int> silent;
  std::string who;
  if (!ctx_.comm->find_silent_ranks(grace, &silent)) {
    who = "which rank stopped is unknown";
  } else if (silent.empty()) {
    who =
        "every rank answered a liveness check, so some rank's coordinator is stuck (a callback "
        "that does not return?)";
  } else {
    std::string ranks;
    for (int r : silent) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    who = fmt::format(
        "{} {} did not answer a liveness check within {} s (stopped, hung or "
        "unreachable)",
        silent.size() == 1 ? "rank" : "ranks", ranks, grace.count() / 1000.0);
  }
  // Every op not yet taken for execution (negotiating, held by the batcher, or submitted while
  // this coordinator was blocked in the collective that timed out), then those executing.
  std::vector<std::string> tensors = queue_.in_flight_names();
  for (const std::string& name : executing_) {
    if (std::find(tensors.begin(), tensors.end(), name) == tensors.end()) tensors.push_back(name);
  }
  timeout_message_ =
      fmt::format("stall shutdown on rank {} in {}: {}; {}; tensors in flight on rank {}: {}",
                  ctx_.rank, activity_, timeout.what(), who, ctx_.rank, quoted_list(tensors, 8));
  return timeout_message_;
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

void Coordinator::before_automatic(const std::vector<TensorEntry*>& members) {
  if (choice_.enabled() && !choice_.started()) {
    // Every tensor's loaded state, not only this bucket's: the record lives in the saved
    // clock's state, and the first bucket after a resume need not hold the clock (dense buckets
    // form as backward produces them).
    std::lock_guard<std::mutex> lock(state_.mutex());
    std::vector<std::pair<const std::string*, const TensorState*>> states;
    state_.for_each([&](const std::string& name, const TensorState& state) {
      states.emplace_back(&name, &state);
    });
    if (choice_.restore_from(states)) {
      admission_.batcher().set_policy(batcher_policy(choice_.holding()));
      if (ctx_.rank == 0) {
        ctx_.log->info("ARCREDUCE_AUTO_COMPRESS: resumed from the saved state at step {} ({})",
                       choice_.steps(), choice_.state());
      }
    }
  }
  // The member's own count of reductions is the step it is in, whichever bucket it shares with
  // the clock: every tensor of a step goes the same way, however the step's buckets formed (they
  // form by timing, and a resumed job's first step holds nothing back).
  uint64_t step = 0;
  {
    std::lock_guard<std::mutex> lock(state_.mutex());
    const TensorEntry& first = *members.front();
    step = state_.get(first.name, static_cast<size_t>(first.signature.elements())).reductions;
  }
  executor_.set_automatic_dense(choice_.mode_at(step) == CompressionChoice::Mode::kDense);
}

void Coordinator::after_automatic(const std::vector<TensorEntry*>& members, Clock::time_point end) {
  if (!choice_.enabled()) return;
  std::vector<const std::string*> names;
  for (const TensorEntry* m : members) names.push_back(&m->name);
  const uint64_t before = choice_.steps();
  choice_.executed(names, end);
  if (choice_.steps() == before) return;  // the clock did not tick
  admission_.batcher().set_policy(batcher_policy(choice_.holding()));
  for (const TensorEntry* m : members) {
    if (m->name != choice_.clock()) continue;
    std::lock_guard<std::mutex> lock(state_.mutex());
    choice_.save_to(state_.get(m->name, static_cast<size_t>(m->signature.elements())));
  }
}

TensorEntry Coordinator::zeros_for(const Response& resp) {
  joined_zeros_.emplace_back(resp.signature.bytes(), 0);
  TensorEntry entry;
  entry.name = resp.name;
  entry.tensor = Tensor{joined_zeros_.back().data(), resp.signature.dtype, resp.signature.shape};
  entry.signature = resp.signature;
  entry.submitted = Clock::now();
  return entry;  // handle 0: completing it does nothing
}

void Coordinator::execute(const CyclePlan& plan, Clock::time_point negotiated) {
  joined_zeros_.clear();
  std::vector<TensorEntry> entries;
  std::vector<TensorSignature> signatures;
  entries.reserve(plan.responses.size());
  for (const Response& resp : plan.responses) {
    TensorEntry entry;
    if (!queue_.take_entry(resp.name, &entry)) {
      const bool joined = queue_.has_in_flight(kJoinName);
      // Not submitted here while this rank has joined: an error is the others' to report; an
      // allreduce gets this rank's zeros (as Horovod's join).
      if (resp.code != StatusCode::kOk && joined) continue;
      if (joined && resp.signature.collective == Collective::kAllreduce &&
          resp.signature.device == Device::kCPU) {
        entries.push_back(zeros_for(resp));
        signatures.push_back(resp.signature);
        continue;
      }
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
    if (resp.signature.collective == Collective::kJoin) last_joined_ = resp.signature.root_rank;
    entries.push_back(std::move(entry));
    signatures.push_back(resp.signature);
  }
  std::vector<bool> done(entries.size(), false);
  executing_.clear();
  for (const TensorEntry& e : entries) executing_.push_back(e.name);
  try {
    size_t position = 0;
    for (const Bucket& bucket : plan_buckets(signatures, ctx_.config.fusion_threshold)) {
      std::vector<TensorEntry*> members;
      for (size_t i : bucket.members) members.push_back(&entries[i]);
      const Clock::time_point begin = Clock::now();
      activity_ =
          "bucket " + std::to_string(position) + " (" +
          signatures[bucket.members[0]].compression.compressor + ": '" + members[0]->name + "'" +
          (members.size() > 1 ? " and " + std::to_string(members.size() - 1) + " more" : "") + ")";
      const bool automatic = signatures[bucket.members[0]].compression.automatic;
      if (automatic) before_automatic(members);
      std::unique_ptr<DeviceCompletion> pending =
          executor_.run(members, signatures[bucket.members[0]], stats_);
      const Clock::time_point end = Clock::now();
      if (automatic) after_automatic(members, end);
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
        const Clock::time_point returned =
            queue_.complete(entries[i], entries[i].failed ? *entries[i].failed : Status::OK());
        if (timeline_) timeline_->span(name, "callback", "callback", callback, returned);
      }
    }
  } catch (const CommunicationTimeout& e) {
    // As below, with the stall message that names the silent ranks.
    const Status failed(StatusCode::kStalled, describe_timeout(e));
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!done[i]) queue_.complete(entries[i], failed);
    }
    throw;
  } catch (const std::exception& e) {
    // Ops taken out of the queue are not reachable by close(): fail them here.
    Status failed(StatusCode::kInternal, std::string("arcreduce coordinator failed: ") + e.what());
    for (size_t i = 0; i < entries.size(); ++i) {
      if (done[i]) continue;
      queue_.complete(entries[i], failed);
    }
    throw;
  }
  executing_.clear();
}

}  // namespace arcreduce
