#include "tensor_queue/message.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

namespace arcreduce {
namespace {

class Writer {
 public:
  template <typename T>
  void pod(T value) {
    static_assert(std::is_trivially_copyable<T>::value, "pod only");
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T pod() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string str() {
    uint64_t n = pod<uint64_t>();
    need(n);
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void expect_end() const {
    if (pos_ != in_.size())
      throw Error("negotiation message has trailing bytes", StatusCode::kInternal);
  }

 private:
  void need(uint64_t n) const {
    if (n > in_.size() - pos_) {
      throw Error("negotiation message is truncated", StatusCode::kInternal);
    }
  }
  const std::string& in_;
  size_t pos_ = 0;
};

void write_signature(Writer& w, const TensorSignature& s) {
  w.pod<int32_t>(static_cast<int32_t>(s.dtype));
  w.pod<uint64_t>(s.shape.size());
  for (int64_t d : s.shape) w.pod<int64_t>(d);
  w.pod<int32_t>(static_cast<int32_t>(s.device));
  w.pod<int32_t>(static_cast<int32_t>(s.op));
  w.str(s.compression.compressor);
  w.pod<double>(s.compression.ratio);
  w.str(s.compression.error_feedback);
  w.str(s.compression.granularity);
  w.pod<uint8_t>(s.compression.automatic ? 1 : 0);
  w.pod<int32_t>(static_cast<int32_t>(s.collective));
  w.pod<int32_t>(s.root_rank);
  w.pod<uint64_t>(s.extents.size());
  for (int64_t e : s.extents) w.pod<int64_t>(e);
}

[[noreturn]] void corrupt(const std::string& what) {
  throw Error("negotiation message is corrupt: " + what, StatusCode::kInternal);
}

// Reads an enum stored as int32, rejecting values outside [0, last]: every switch over these
// enums (dtype sizes, reduction kernels) assumes a known value.
template <typename E>
E read_enum(Reader& r, E last, const char* what) {
  const int32_t v = r.pod<int32_t>();
  if (v < 0 || v > static_cast<int32_t>(last)) corrupt(std::string(what) + " " + std::to_string(v));
  return static_cast<E>(v);
}

TensorSignature read_signature(Reader& r) {
  TensorSignature s;
  s.dtype = read_enum(r, DType::kBool, "dtype");
  uint64_t dims = r.pod<uint64_t>();
  if (dims > 64) corrupt("a shape of " + std::to_string(dims) + " dimensions");
  // Every rank computes byte sizes from the shape: no negative dimension, and no product that
  // overflows int64 bytes (8 bytes per element at most).
  int64_t elements = 1;
  for (uint64_t i = 0; i < dims; ++i) {
    const int64_t d = r.pod<int64_t>();
    if (d < 0 || (d > 0 && elements > std::numeric_limits<int64_t>::max() / 8 / d)) {
      corrupt("dimension " + std::to_string(d) + " of a shape");
    }
    elements *= d;
    s.shape.push_back(d);
  }
  s.device = read_enum(r, Device::kCUDA, "device");
  s.op = read_enum(r, ReduceOp::kProduct, "reduce op");
  s.compression.compressor = r.str();
  s.compression.ratio = r.pod<double>();
  if (!std::isfinite(s.compression.ratio)) corrupt("a compression ratio that is not finite");
  s.compression.error_feedback = r.str();
  s.compression.granularity = r.str();
  const uint8_t automatic = r.pod<uint8_t>();
  if (automatic > 1) corrupt("an automatic-compression flag " + std::to_string(automatic));
  s.compression.automatic = automatic == 1;
  s.collective = read_enum(r, Collective::kJoin, "collective");
  s.root_rank = r.pod<int32_t>();
  const uint64_t extents = r.pod<uint64_t>();
  if (extents > (uint64_t{1} << 24)) corrupt(std::to_string(extents) + " extents");
  for (uint64_t i = 0; i < extents; ++i) {
    const int64_t e = r.pod<int64_t>();
    if (e < 0) corrupt("a negative extent " + std::to_string(e));
    s.extents.push_back(e);
  }
  return s;
}

}  // namespace

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kAllgather:
      return "allgather";
    case Collective::kAlltoall:
      return "alltoall";
    case Collective::kReducescatter:
      return "reducescatter";
    case Collective::kJoin:
      return "join";
    default:
      return "allreduce";
  }
}

const char* const kJoinName = "[join]";

bool cacheable(Collective collective) {
  return !shaped_by_every_rank(collective) && collective != Collective::kJoin;
}

bool shaped_by_every_rank(Collective collective) {
  return collective == Collective::kAllgather || collective == Collective::kAlltoall ||
         collective == Collective::kReducescatter;
}

std::string CompressionSpec::to_string() const {
  std::ostringstream os;
  os << compressor << "(ratio=" << ratio << ", ef=" << error_feedback;
  if (!granularity.empty()) os << ", " << granularity;
  if (automatic) os << ", auto";
  os << ")";
  return os.str();
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string encode(const RequestList& list) {
  Writer w;
  w.pod<uint64_t>(list.requests.size());
  for (const Request& r : list.requests) {
    w.str(r.name);
    write_signature(w, r.signature);
    w.pod<double>(r.age_seconds);
    w.str(r.refusal);
  }
  return w.take();
}

RequestList decode_request_list(const std::string& bytes) {
  Reader r(bytes);
  RequestList list;
  uint64_t n = r.pod<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    Request req;
    req.name = r.str();
    req.signature = read_signature(r);
    req.age_seconds = r.pod<double>();
    // Rank 0 turns the age into a clock offset (MessageTable::add): keep it in range.
    if (!(req.age_seconds >= 0 && req.age_seconds <= 1e9)) {
      corrupt("a request age of " + std::to_string(req.age_seconds) + " s");
    }
    req.refusal = r.str();
    list.requests.push_back(std::move(req));
  }
  r.expect_end();
  return list;
}

std::string encode(const ResponseList& list) {
  Writer w;
  w.pod<uint64_t>(list.responses.size());
  for (const Response& resp : list.responses) {
    w.str(resp.name);
    w.pod<int32_t>(static_cast<int32_t>(resp.code));
    w.str(resp.error);
    write_signature(w, resp.signature);
  }
  w.str(list.abort_reason);
  return w.take();
}

ResponseList decode_response_list(const std::string& bytes) {
  Reader r(bytes);
  ResponseList list;
  uint64_t n = r.pod<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    Response resp;
    resp.name = r.str();
    resp.code = read_enum(r, StatusCode::kInternal, "status code");
    resp.error = r.str();
    resp.signature = read_signature(r);
    list.responses.push_back(std::move(resp));
  }
  list.abort_reason = r.str();
  r.expect_end();
  return list;
}

}  // namespace arcreduce
