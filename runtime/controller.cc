#include "runtime/controller.h"

#include <algorithm>
#include <iterator>

#include "runtime/config_fields.h"

namespace arcreduce {
namespace {

// Flag bits of word 0; a cleared bit means "true on some rank".
constexpr uint64_t kFlagNoUncached = 1ull << 0;
constexpr uint64_t kFlagNoShutdown = 1ull << 1;
constexpr uint64_t kFlagNoAbort = 1ull << 2;
constexpr uint64_t kFlagIdle = 1ull << 3;
// Not inverted: AND computes "every rank agrees" (CyclePlan::every_rank_agrees).
constexpr uint64_t kFlagAgree = 1ull << 4;

size_t words_for(size_t bits) {
  return (bits + 63) / 64;
}
bool test_bit(const uint64_t* words, size_t i) {
  return (words[i / 64] >> (i % 64)) & 1;
}
void set_bit(uint64_t* words, size_t i) {
  words[i / 64] |= 1ull << (i % 64);
}
void clear_bit(uint64_t* words, size_t i) {
  words[i / 64] &= ~(1ull << (i % 64));
}

}  // namespace

Controller::Controller(Context& ctx)
    : ctx_(ctx), cache_(static_cast<size_t>(ctx.config.cache_capacity)), table_(ctx.size) {}

std::vector<uint64_t> Controller::build_bits(bool shutdown_requested, bool abort_due, bool agree,
                                             const std::vector<size_t>& invalid_local) const {
  const size_t w = words_for(cache_.capacity());
  std::vector<uint64_t> bits(1 + 2 * w, 0);
  uint64_t flags = ~0ull;
  if (!unsent_.empty() || !refusals_.empty()) flags &= ~kFlagNoUncached;
  if (shutdown_requested) flags &= ~kFlagNoShutdown;
  if (abort_due) flags &= ~kFlagNoAbort;
  if (!pending_.empty() || table_.waiting()) flags &= ~kFlagIdle;
  if (!agree) flags &= ~kFlagAgree;
  bits[0] = flags;
  uint64_t* ready = bits.data() + 1;
  uint64_t* valid = bits.data() + 1 + w;
  std::fill(valid, valid + w, ~0ull);
  for (const auto& kv : pending_) {
    if (kv.second.slot >= 0) set_bit(ready, static_cast<size_t>(kv.second.slot));
  }
  if (joined()) {
    // A joined rank is ready for every cached allreduce (the others' bits decide); any other
    // cached collective is renegotiated, so that rank 0 fails it, naming this rank.
    for (size_t slot = 0; slot < cache_.capacity(); ++slot) {
      if (cache_.name(slot).empty()) continue;
      if (cache_.signature(slot).collective == Collective::kAllreduce) {
        set_bit(ready, slot);
      } else {
        clear_bit(valid, slot);
      }
    }
  }
  for (size_t slot : invalid_local) {
    clear_bit(ready, slot);
    clear_bit(valid, slot);
  }
  return bits;
}

CyclePlan Controller::run_cycle(const std::vector<Request>& new_requests, bool shutdown_requested,
                                bool agree, Stats& stats) {
  const auto now = Clock::now();
  const Config& cfg = ctx_.config;
  ++stats.cycles;

  // 1. Sort new requests into the cached and the full path.
  std::vector<size_t> invalid_local;
  for (const Request& r : new_requests) {
    if (!r.refusal.empty()) {
      // Not an op of this rank: a message for rank 0's table. A cached slot of the name is
      // invalidated, so that the other ranks' ops of it take the full path and meet it.
      const int64_t slot = cache_.find(r.name);
      if (slot >= 0) invalid_local.push_back(static_cast<size_t>(slot));
      refusals_.push_back(r);
      ++refused_[r.name];
      continue;
    }
    Pending p{r.signature,
              now - std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(r.age_seconds)),
              -1};
    int64_t slot = cache_.find(r.name);
    if (slot >= 0 && cache_.signature(slot) == r.signature) {
      p.slot = slot;
    } else {
      if (slot >= 0) invalid_local.push_back(static_cast<size_t>(slot));
      unsent_.push_back(r.name);
    }
    pending_[r.name] = p;
  }
  // A cached tensor that waits long is renegotiated in full so rank 0 can name missing ranks.
  if (cfg.stall_check_seconds > 0) {
    const double limit = cfg.stall_check_seconds / 4;
    for (const auto& kv : pending_) {
      if (kv.second.slot >= 0 &&
          std::chrono::duration<double>(now - kv.second.since).count() > limit) {
        invalid_local.push_back(static_cast<size_t>(kv.second.slot));
      }
    }
  }
  std::string abort_reason;
  if (ctx_.rank == 0) {
    auto report = table_.inspect(now, cfg.stall_check_seconds, cfg.stall_shutdown_seconds);
    if (!report.warning.empty()) {
      ctx_.log->warn("stall: tensors waited more than {} s for some ranks: {}",
                     cfg.stall_check_seconds, report.warning);
    }
    if (!report.abort.empty()) {
      abort_reason =
          fmt::format("stall shutdown after {} s ({}): tensors never submitted by every rank: {}",
                      cfg.stall_shutdown_seconds, kEnvStallShutdownSeconds, report.abort);
    }
  }

  // 2. One AND All-Reduce of flags and bits.
  std::vector<uint64_t> bits =
      build_bits(shutdown_requested, !abort_reason.empty(), agree, invalid_local);
  ctx_.comm->allreduce(bits.data(), bits.size(), ScalarType::kUInt64, CollectiveOp::kBitAnd);
  const uint64_t flags = bits[0];
  CyclePlan plan;
  plan.busy = !(flags & kFlagIdle);
  plan.every_rank_agrees = (flags & kFlagAgree) != 0;
  if (!(flags & kFlagNoShutdown)) {
    plan.shutdown = true;
    return plan;
  }
  const size_t w = words_for(cache_.capacity());
  const uint64_t* ready = bits.data() + 1;
  const uint64_t* valid = bits.data() + 1 + w;

  // 3. Invalidated slots leave every rank's cache; local tensors there take the full path.
  bool any_invalid = false;
  for (size_t slot = 0; slot < cache_.capacity(); ++slot) {
    if (test_bit(valid, slot)) continue;
    any_invalid = true;
    auto it = pending_.find(cache_.name(slot));
    if (it != pending_.end() && it->second.slot == static_cast<int64_t>(slot)) {
      it->second.slot = -1;
      unsent_.push_back(it->first);
    }
    cache_.erase(slot);
  }
  for (size_t slot = 0; slot < cache_.capacity(); ++slot) {
    if (!test_bit(ready, slot) || !test_bit(valid, slot)) continue;
    Response resp;
    resp.name = cache_.name(slot);
    resp.signature = cache_.signature(slot);
    plan.responses.push_back(std::move(resp));
    ++stats.cache_hits;
  }

  // 4. Full negotiation through rank 0.
  if (!(flags & kFlagNoUncached) || !(flags & kFlagNoAbort) || any_invalid) {
    auto negotiated = negotiate_at_root(abort_reason, &plan.abort_reason, stats);
    for (auto& r : negotiated) plan.responses.push_back(std::move(r));
    if (!plan.abort_reason.empty()) return plan;
  }
  apply_cache_updates(plan.responses);
  return plan;
}

std::vector<Response> Controller::negotiate_at_root(const std::string& abort_reason,
                                                    std::string* abort_out, Stats& stats) {
  ++stats.full_negotiations;
  const auto now = Clock::now();
  RequestList mine;
  for (const std::string& name : unsent_) {
    auto it = pending_.find(name);
    if (it == pending_.end() || it->second.slot >= 0) continue;
    mine.requests.push_back(Request{name, it->second.signature,
                                    std::chrono::duration<double>(now - it->second.since).count()});
  }
  // A refusal goes first: a request of the same name can only have been submitted after it
  // (the queue sends no refusal for a name in flight), and rank 0 counts them in that order.
  mine.requests.insert(mine.requests.begin(), std::make_move_iterator(refusals_.begin()),
                       std::make_move_iterator(refusals_.end()));
  refusals_.clear();
  unsent_.clear();
  std::vector<std::string> blocks;
  ctx_.comm->gatherv(encode(mine), &blocks, 0);
  std::string reply;
  if (ctx_.rank == 0) {
    ResponseList out;
    for (int r = 0; r < ctx_.size; ++r) {
      for (const Request& req : decode_request_list(blocks[r]).requests) {
        table_.add(r, req, now, &out.responses);
      }
    }
    out.abort_reason = abort_reason;
    reply = encode(out);
  }
  ctx_.comm->broadcast(&reply, 0);
  ResponseList list = decode_response_list(reply);
  *abort_out = list.abort_reason;
  std::vector<Response> responses;
  for (Response& r : list.responses) {
    auto it = r.code == StatusCode::kOk ? refused_.end() : refused_.find(r.name);
    if (it == refused_.end()) {
      responses.push_back(std::move(r));
    } else if (--it->second == 0) {
      refused_.erase(it);
    }
  }
  return responses;
}

void Controller::apply_cache_updates(const std::vector<Response>& responses) {
  // Forget executed tensors first, so that an eviction below cannot touch one of them.
  for (const Response& r : responses) pending_.erase(r.name);
  std::string evicted;
  for (const Response& r : responses) {
    if (r.code != StatusCode::kOk || !cacheable(r.signature.collective)) continue;
    cache_.put(r.name, r.signature, &evicted);
    if (evicted.empty()) continue;
    auto it = pending_.find(evicted);
    if (it != pending_.end() && it->second.slot >= 0) {
      it->second.slot = -1;
      unsent_.push_back(it->first);
    }
  }
}

}  // namespace arcreduce
