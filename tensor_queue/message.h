// Negotiation messages: what a rank asks for (Request) and what rank 0 decides (Response), with a
// compact binary encoding. Encoding is host-endian: all ranks of a job share one architecture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arcreduce/status.h"
#include "arcreduce/types.h"

namespace arcreduce {

// Compression of one tensor after per-op options were resolved against the Config.
struct CompressionSpec {
  std::string compressor;
  double ratio = 1.0;
  std::string error_feedback;
  std::string granularity;  // element or row (topk, randk); empty where it does not apply
  // ARCREDUCE_AUTO_COMPRESS: the tensor took the job's compression without choosing its own, and
  // the runtime decides, step by step and the same on every rank, whether it goes compressed or
  // dense (runtime/compression_choice.h). False: always as above.
  bool automatic = false;

  bool operator==(const CompressionSpec& o) const {
    return compressor == o.compressor && ratio == o.ratio && error_feedback == o.error_feedback &&
           granularity == o.granularity && automatic == o.automatic;
  }
  bool operator!=(const CompressionSpec& o) const { return !(*this == o); }
  std::string to_string() const;  // e.g. "arctopk(ratio=0.01, ef=ef21m)"
};

// kAllgather, kAlltoall and kReducescatter have outputs shaped by every rank's input: they are
// negotiated in full each time (never cached) and never fused.
// kJoin: a rank that ran out of work (join()); see MessageTable.
enum class Collective { kAllreduce, kBroadcast, kAllgather, kAlltoall, kReducescatter, kJoin };
const char* collective_name(Collective collective);  // "allreduce", "broadcast", ...
// Whether the op's output shape is known only after negotiation (see above).
bool shaped_by_every_rank(Collective collective);
// Whether responses of the collective may be cached (not: shaped ops and join).
bool cacheable(Collective collective);
// The name join() is negotiated under (reserved: submissions under it are refused).
extern const char* const kJoinName;

// Everything about one submitted tensor that must agree across ranks.
struct TensorSignature {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  Device::Kind device = Device::kCPU;
  ReduceOp op = ReduceOp::kAverage;
  CompressionSpec compression;
  Collective collective = Collective::kAllreduce;
  int root_rank = 0;  // broadcast: the rank whose bytes everyone receives; 0 for allreduce
  // In a Request: alltoall's splits (rows this rank sends to each rank). In a Response: allgather's
  // first dimension of every rank, alltoall's splits of every rank (row-major [from][to]).
  std::vector<int64_t> extents;

  bool operator==(const TensorSignature& o) const {
    return dtype == o.dtype && shape == o.shape && device == o.device && op == o.op &&
           compression == o.compression && collective == o.collective && root_rank == o.root_rank &&
           extents == o.extents;
  }
  bool operator!=(const TensorSignature& o) const { return !(*this == o); }
  int64_t elements() const { return num_elements(shape); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype); }
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[3, 4]"

struct Request {
  std::string name;
  TensorSignature signature;
  double age_seconds = 0;  // how long the tensor had waited on its rank when this was sent
  // Non-empty: this rank refused its op of `name` before queueing it (bad input), and tells the
  // others so that theirs fail with this reason instead of waiting for it (MessageTable).
  std::string refusal;
};

struct RequestList {
  std::vector<Request> requests;
};

// One tensor's outcome. Rank 0 produces these in execution order; fusion happens afterwards on
// every rank with the same deterministic planner.
struct Response {
  std::string name;
  StatusCode code = StatusCode::kOk;  // kOk: reduce it; otherwise fail it with `error`
  std::string error;
  TensorSignature signature;  // valid when code == kOk
};

struct ResponseList {
  std::vector<Response> responses;
  std::string abort_reason;  // non-empty: the stall inspector ends the job
};

std::string encode(const RequestList& list);
RequestList decode_request_list(const std::string& bytes);  // throws Error on malformed input
std::string encode(const ResponseList& list);
ResponseList decode_response_list(const std::string& bytes);

}  // namespace arcreduce
