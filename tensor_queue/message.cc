#include "tensor_queue/message.h"

#include <cstring>
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
  w.pod<int32_t>(static_cast<int32_t>(s.collective));
  w.pod<int32_t>(s.root_rank);
}

TensorSignature read_signature(Reader& r) {
  TensorSignature s;
  s.dtype = static_cast<DType>(r.pod<int32_t>());
  uint64_t dims = r.pod<uint64_t>();
  if (dims > 64) throw Error("negotiation message has a corrupt shape", StatusCode::kInternal);
  for (uint64_t i = 0; i < dims; ++i) s.shape.push_back(r.pod<int64_t>());
  s.device = static_cast<Device::Kind>(r.pod<int32_t>());
  s.op = static_cast<ReduceOp>(r.pod<int32_t>());
  s.compression.compressor = r.str();
  s.compression.ratio = r.pod<double>();
  s.compression.error_feedback = r.str();
  s.compression.granularity = r.str();
  s.collective = static_cast<Collective>(r.pod<int32_t>());
  s.root_rank = r.pod<int32_t>();
  return s;
}

}  // namespace

const char* collective_name(Collective collective) {
  return collective == Collective::kBroadcast ? "broadcast" : "allreduce";
}

std::string CompressionSpec::to_string() const {
  std::ostringstream os;
  os << compressor << "(ratio=" << ratio << ", ef=" << error_feedback;
  if (!granularity.empty()) os << ", " << granularity;
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
    resp.code = static_cast<StatusCode>(r.pod<int32_t>());
    resp.error = r.str();
    resp.signature = read_signature(r);
    list.responses.push_back(std::move(resp));
  }
  list.abort_reason = r.str();
  r.expect_end();
  return list;
}

}  // namespace arcreduce
