#include "runtime/message_table.h"

#include <algorithm>
#include <functional>
#include <sstream>

namespace arcreduce {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

const char* device_name(Device::Kind kind) {
  return kind == Device::kCUDA ? "cuda" : "cpu";
}

// "shape: [3, 4] on ranks 0, 1 vs [4, 4] on rank 2", or "" when all ranks agree.
std::string field_disagreement(const char* field, const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < values.size(); ++r) {
    bool found = false;
    for (auto& g : groups) {
      if (g.first == values[r]) {
        g.second.push_back(static_cast<int>(r));
        found = true;
        break;
      }
    }
    if (!found) groups.push_back({values[r], {static_cast<int>(r)}});
  }
  if (groups.size() == 1) return "";
  std::string s = std::string(field) + ": ";
  for (size_t i = 0; i < groups.size(); ++i) {
    s += (i ? " vs " : "") + groups[i].first + " on " + rank_list(groups[i].second);
  }
  return s;
}

}  // namespace

void MessageTable::add(int rank, const Request& request, Clock::time_point now,
                       std::vector<Response>* out) {
  auto it = pending_.find(request.name);
  if (it == pending_.end()) {
    Pending p;
    p.by_rank.resize(world_size_);
    p.first_seen = now;
    it = pending_.emplace(request.name, std::move(p)).first;
  }
  Pending& p = it->second;
  // The age a rank reports moves first_seen back to its submission time.
  auto submitted = now - std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(request.age_seconds));
  if (submitted < p.first_seen) p.first_seen = submitted;
  if (p.by_rank[rank]) {
    p.later.emplace_back(rank, request);
    return;
  }
  p.by_rank[rank] = request;
  ++p.count;
  if (!request.refusal.empty()) ++p.refusals;
  const bool join = request.refusal.empty() && request.signature.collective == Collective::kJoin;
  if (join && p.count < world_size_) {
    if (!joined_[rank]) ++joined_count_;
    joined_[rank] = true;
    complete_for_joined(now, out);
    return;
  }
  if (!complete(p)) return;
  if (join) {
    // Every rank has joined: the last one is this request's.
    Response resp = validate(request.name, p);
    resp.signature.root_rank = rank;
    out->push_back(std::move(resp));
    std::fill(joined_.begin(), joined_.end(), false);
    joined_count_ = 0;
  } else {
    out->push_back(p.count < world_size_ ? validate_with_joined(request.name, p)
                                         : validate(request.name, p));
  }
  requeue_later(it, now, out);
}

bool MessageTable::complete(const Pending& p) const {
  if (p.count == world_size_) return true;
  if (joined_count_ == 0) return false;  // the per-request path stays O(1) without join()
  // A join waits for every rank's own request, not for the joined set.
  for (const auto& r : p.by_rank) {
    if (r && r->signature.collective == Collective::kJoin) return false;
  }
  for (int r = 0; r < world_size_; ++r) {
    if (!p.by_rank[r] && !joined_[r]) return false;
  }
  return p.count > 0;
}

Response MessageTable::validate_with_joined(const std::string& name, Pending p) const {
  const Request* present = nullptr;
  std::vector<int> absent;
  for (int r = 0; r < world_size_; ++r) {
    if (p.by_rank[r]) {
      if (!present) present = &*p.by_rank[r];
    } else {
      absent.push_back(r);
    }
  }
  const Request first = *present;
  for (int r : absent) p.by_rank[r] = first;  // compared as if they had submitted alike
  Response resp = validate(name, p);
  if (resp.code == StatusCode::kOk && resp.signature.collective != Collective::kAllreduce) {
    std::string ranks;
    for (size_t i = 0; i < absent.size(); ++i) ranks += (i ? ", " : "") + std::to_string(absent[i]);
    resp.code = StatusCode::kInvalidArgument;
    resp.error = "tensor '" + name + "': " + collective_name(resp.signature.collective) +
                 " cannot run while rank" + (absent.size() > 1 ? "s " : " ") + ranks +
                 (absent.size() > 1 ? " have" : " has") +
                 " joined (join()); only allreduce takes part for a joined rank";
    resp.signature = TensorSignature();
  }
  return resp;
}

void MessageTable::complete_for_joined(Clock::time_point now, std::vector<Response>* out) {
  // One at a time: completing a tensor re-adds requests queued behind it, which may change
  // the table under an iterator.
  while (true) {
    auto it = std::find_if(pending_.begin(), pending_.end(), [&](const auto& kv) {
      return kv.second.count < world_size_ && complete(kv.second);
    });
    if (it == pending_.end()) return;
    out->push_back(validate_with_joined(it->first, it->second));
    requeue_later(it, now, out);
  }
}

void MessageTable::requeue_later(std::map<std::string, Pending>::iterator it, Clock::time_point now,
                                 std::vector<Response>* out) {
  std::vector<std::pair<int, Request>> later = std::move(it->second.later);
  pending_.erase(it);
  for (auto& [rank, request] : later) add(rank, request, now, out);
}

bool MessageTable::waiting() const {
  for (const auto& kv : pending_) {
    if (kv.second.refusals < kv.second.count) return true;
  }
  return false;
}

namespace {

// Each rank's input fits in 64-bit byte counts (checked at submission and when parsed), but an
// allgather's output adds every rank's first dimension, and an alltoall's what every rank sends
// to one: every rank sizes its output from these, so a sum that overflows fails the op on every
// rank, naming the tensor. Empty when the outputs fit.
std::string check_output_size(const std::string& name, const TensorSignature& s, int world_size) {
  std::vector<int64_t> row(s.shape.begin() + (s.shape.empty() ? 0 : 1), s.shape.end());
  const int64_t row_bytes = num_bytes(row, s.dtype);
  const size_t ranks = static_cast<size_t>(world_size);
  if (s.extents.size() != (s.collective == Collective::kAllgather ? ranks : ranks * ranks)) {
    return "tensor '" + name + "': " + std::to_string(s.extents.size()) + " extents for a job of " +
           std::to_string(world_size) + " ranks";
  }
  for (size_t to = 0; to < (s.collective == Collective::kAllgather ? 1 : ranks); ++to) {
    int64_t rows = 0;
    bool overflow = row_bytes < 0;
    for (size_t from = 0; from < ranks && !overflow; ++from) {
      const int64_t e =
          s.collective == Collective::kAllgather ? s.extents[from] : s.extents[from * ranks + to];
      overflow = __builtin_add_overflow(rows, e, &rows);
    }
    int64_t bytes = 0;
    if (overflow || __builtin_mul_overflow(rows, row_bytes, &bytes)) {
      return "tensor '" + name + "': the " + collective_name(s.collective) +
             "'s output (the rows of every rank, rows of shape " + shape_string(row) +
             ") has more bytes than a 64-bit count holds";
    }
  }
  return "";
}

}  // namespace

Response MessageTable::validate(const std::string& name, const Pending& p) const {
  if (p.refusals > 0) {
    // Refused on some rank: nothing to compare, every rank's op fails with the first reason.
    std::vector<int> refused;
    const std::string* reason = nullptr;
    for (int r = 0; r < world_size_; ++r) {
      if (p.by_rank[r]->refusal.empty()) continue;
      refused.push_back(r);
      if (!reason) reason = &p.by_rank[r]->refusal;
    }
    Response resp;
    resp.name = name;
    resp.code = StatusCode::kInvalidArgument;
    resp.error = "tensor '" + name + "' was refused on " + rank_list(refused) + ": " + *reason;
    return resp;
  }
  // Allgather and alltoall take a first dimension of each rank's own: the rest must agree.
  const Collective collective = p.by_rank[0]->signature.collective;
  const bool own_first_dimension =
      collective == Collective::kAllgather || collective == Collective::kAlltoall;
  std::vector<std::function<std::string(const TensorSignature&)>> fields = {
      [](const TensorSignature& s) { return std::string(dtype_name(s.dtype)); },
      [own_first_dimension](const TensorSignature& s) {
        if (!own_first_dimension || s.shape.empty()) return shape_string(s.shape);
        return "[*" + shape_string(s.shape).substr(1 + std::to_string(s.shape[0]).size());
      },
      [](const TensorSignature& s) { return std::string(reduce_op_name(s.op)); },
      [](const TensorSignature& s) { return std::string(device_name(s.device)); },
      [](const TensorSignature& s) { return s.compression.to_string(); },
      [](const TensorSignature& s) { return std::string(collective_name(s.collective)); },
      [](const TensorSignature& s) { return std::to_string(s.root_rank); },
  };
  const char* field_names[] = {"dtype",       "shape",      "op",       "device",
                               "compression", "collective", "root rank"};
  std::string problems;
  for (size_t f = 0; f < fields.size(); ++f) {
    std::vector<std::string> values;
    for (const auto& r : p.by_rank) values.push_back(fields[f](r->signature));
    std::string d = field_disagreement(field_names[f], values);
    if (!d.empty()) problems += (problems.empty() ? "" : "; ") + d;
  }
  Response resp;
  resp.name = name;
  const TensorSignature& first = p.by_rank[0]->signature;
  if (problems.empty() && first.collective == Collective::kBroadcast &&
      (first.root_rank < 0 || first.root_rank >= world_size_)) {
    resp.code = StatusCode::kInvalidArgument;
    resp.error = "tensor '" + name + "': broadcast root rank " + std::to_string(first.root_rank) +
                 " (given by every rank) is not a rank of this job of " +
                 std::to_string(world_size_) + " ranks (0 to " + std::to_string(world_size_ - 1) +
                 ")";
  } else if (problems.empty()) {
    resp.signature = first;
    if (collective == Collective::kAllgather || collective == Collective::kAlltoall) {
      // Every rank learns what every other contributes: allgather's first dimensions, alltoall's
      // splits (row-major [from][to]).
      resp.signature.extents.clear();
      for (const auto& r : p.by_rank) {
        const TensorSignature& s = r->signature;
        if (collective == Collective::kAllgather) {
          resp.signature.extents.push_back(s.shape.empty() ? 1 : s.shape[0]);
        } else {
          resp.signature.extents.insert(resp.signature.extents.end(), s.extents.begin(),
                                        s.extents.end());
        }
      }
      const std::string too_large = check_output_size(name, resp.signature, world_size_);
      if (!too_large.empty()) {
        resp.signature = TensorSignature();
        resp.code = StatusCode::kInvalidArgument;
        resp.error = too_large;
      }
    }
  } else {
    resp.code = StatusCode::kMismatch;
    resp.error = "tensor '" + name + "' was submitted differently across ranks (" + problems + ")";
  }
  return resp;
}

std::string MessageTable::describe_missing(const std::string& name, const Pending& p,
                                           Clock::time_point now) const {
  std::vector<int> have, missing;
  for (int r = 0; r < world_size_; ++r) (p.by_rank[r] ? have : missing).push_back(r);
  std::ostringstream os;
  os.precision(3);
  os << "'" << name << "' (waiting " << std::chrono::duration<double>(now - p.first_seen).count()
     << " s; submitted by " << rank_list(have) << "; missing from " << rank_list(missing) << ")";
  return os.str();
}

MessageTable::StallReport MessageTable::inspect(Clock::time_point now, double check_seconds,
                                                double shutdown_seconds) {
  StallReport report;
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    double waited = std::chrono::duration<double>(now - p.first_seen).count();
    if (p.refusals == p.count) {
      // Refused where no other rank submitted the tensor yet: nobody waits, so it is no stall.
      // It stays until the others submit the name (their op then fails with the refusal).
      ++it;
      continue;
    }
    auto& kv = *it;
    ++it;
    if (shutdown_seconds > 0 && waited >= shutdown_seconds) {
      report.abort += (report.abort.empty() ? "" : ", ") + describe_missing(kv.first, p, now);
    } else if (check_seconds > 0 && waited >= check_seconds && !p.warned) {
      p.warned = true;
      report.warning += (report.warning.empty() ? "" : ", ") + describe_missing(kv.first, p, now);
    }
  }
  return report;
}

}  // namespace arcreduce
