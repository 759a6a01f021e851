#include "compressors/tensor_state.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "arcreduce/status.h"

namespace arcreduce {
namespace {

constexpr char kMagic[8] = {'A', 'R', 'C', 'S', 'T', 'A', 'T', 'E'};
// Version 2 added the named compressor state (TensorState::floats, int64s, doubles).
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOldestReadableVersion = 1;

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class Out {
 public:
  template <typename T>
  void pod(T v) {
    s_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& v) {
    pod<uint64_t>(v.size());
    s_.append(v);
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    pod<uint64_t>(v.size());
    s_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void floats(const std::vector<float>& v) { vec(v); }
  // Count, then (name, vector) in name order.
  template <typename T>
  void named(const std::map<std::string, std::vector<T>>& entries) {
    pod<uint64_t>(entries.size());
    for (const auto& kv : entries) {
      str(kv.first);
      vec(kv.second);
    }
  }
  std::string& bytes() { return s_; }

 private:
  std::string s_;
};

class In {
 public:
  In(const std::string& s, const std::string& path) : s_(s), path_(path) {}
  template <typename T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    auto n = pod<uint64_t>();
    need(n);
    std::string v = s_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  template <typename T>
  std::vector<T> vec() {
    auto n = pod<uint64_t>();
    if (n > (s_.size() - pos_) / sizeof(T)) fail("truncated");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), s_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  std::vector<float> floats() { return vec<float>(); }
  template <typename T>
  std::map<std::string, std::vector<T>> named() {
    std::map<std::string, std::vector<T>> entries;
    const auto count = pod<uint64_t>();
    for (uint64_t i = 0; i < count; ++i) {
      std::string name = str();
      if (entries.count(name)) fail("duplicate state entry '" + name + "': corrupted");
      entries.emplace(std::move(name), vec<T>());
    }
    return entries;
  }
  size_t pos() const { return pos_; }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("load_state('" + path_ + "'): " + why);
  }

 private:
  void need(uint64_t n) const {
    if (n > s_.size() - pos_) fail("the file is truncated or corrupted");
  }
  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

TensorState& StateStore::get(const std::string& name, size_t elements) {
  auto it = states_.find(name);
  if (it == states_.end()) {
    if (loaded_ && !states_.empty()) {
      throw Error("tensor '" + name +
                  "' has no state in the loaded state file: the file was saved by a job with "
                  "another set of tensors");
    }
    TensorState& s = states_[name];
    s.elements = elements;
    return s;
  }
  TensorState& s = it->second;
  if (s.elements != elements) {
    if (loaded_) {
      throw Error("tensor '" + name + "' has " + std::to_string(elements) +
                  " elements but the loaded state file holds " + std::to_string(s.elements) +
                  ": the file was saved by a job with other tensor shapes");
    }
    s = TensorState();
    s.elements = elements;
  }
  return s;
}

std::string StateStore::save_bytes(int rank, int size) const {
  Out out;
  out.bytes().append(kMagic, sizeof(kMagic));
  out.pod<uint32_t>(kVersion);
  out.pod<int32_t>(rank);
  out.pod<int32_t>(size);
  out.pod<uint64_t>(states_.size());
  for (const auto& kv : states_) {
    const TensorState& s = kv.second;
    out.str(kv.first);
    out.pod<uint64_t>(s.elements);
    out.pod<uint64_t>(s.reductions);
    out.pod<uint64_t>(s.compressed_steps);
    out.pod<uint8_t>(s.ef_started ? 1 : 0);
    out.floats(s.e);
    out.floats(s.h);
    out.floats(s.hbar);
    out.floats(s.v);
    out.named(s.floats);
    out.named(s.int64s);
    out.named(s.doubles);
  }
  out.pod<uint64_t>(fnv1a(out.bytes()));
  return std::move(out.bytes());
}

void StateStore::save(const std::string& path, int rank, int size) const {
  const std::string bytes = save_bytes(rank, size);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw Error("save_state('" + path + "'): cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error("save_state('" + path + "'): cannot rename " + tmp + " to it");
  }
}

void StateStore::load(const std::string& path, int rank, int size) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("load_state('" + path + "'): cannot open the file");
  std::stringstream buffer;
  buffer << f.rdbuf();
  load_bytes(buffer.str(), path, rank, size);
}

void StateStore::load_bytes(const std::string& bytes, const std::string& path, int rank, int size) {
  In in(bytes, path);
  if (bytes.size() < sizeof(kMagic) + sizeof(uint64_t) ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    in.fail("not an arcreduce state file");
  }
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof(stored), sizeof(stored));
  if (fnv1a(bytes.substr(0, bytes.size() - sizeof(stored))) != stored) {
    in.fail("checksum mismatch: the file is corrupted");
  }
  for (size_t i = 0; i < sizeof(kMagic); ++i) in.pod<char>();
  const auto version = in.pod<uint32_t>();
  if (version < kOldestReadableVersion || version > kVersion) {
    in.fail("file version " + std::to_string(version) + ", this build reads versions " +
            std::to_string(kOldestReadableVersion) + " to " + std::to_string(kVersion));
  }
  const auto file_rank = in.pod<int32_t>();
  const auto file_size = in.pod<int32_t>();
  if (file_rank != rank || file_size != size) {
    in.fail("saved by rank " + std::to_string(file_rank) + " of " + std::to_string(file_size) +
            ", loaded by rank " + std::to_string(rank) + " of " + std::to_string(size));
  }
  std::map<std::string, TensorState> states;
  const auto count = in.pod<uint64_t>();
  for (uint64_t i = 0; i < count; ++i) {
    std::string name = in.str();
    TensorState s;
    s.elements = in.pod<uint64_t>();
    s.reductions = in.pod<uint64_t>();
    s.compressed_steps = in.pod<uint64_t>();
    s.ef_started = in.pod<uint8_t>() != 0;
    s.e = in.floats();
    s.h = in.floats();
    s.hbar = in.floats();
    s.v = in.floats();
    // The error feedback indexes its buffers by the tensor's element count.
    for (const std::vector<float>* buffer : {&s.e, &s.h, &s.hbar, &s.v}) {
      if (!buffer->empty() && buffer->size() != s.elements) {
        in.fail("tensor '" + name + "' has an error-feedback buffer of " +
                std::to_string(buffer->size()) + " entries for " + std::to_string(s.elements) +
                " elements: corrupted");
      }
    }
    if (version >= 2) {
      s.floats = in.named<float>();
      s.int64s = in.named<int64_t>();
      s.doubles = in.named<double>();
    }
    if (states.count(name)) in.fail("tensor '" + name + "' is listed twice: corrupted");
    states.emplace(std::move(name), std::move(s));
  }
  if (in.pos() != bytes.size() - sizeof(stored)) in.fail("trailing bytes: corrupted");
  states_ = std::move(states);
  loaded_ = true;
  if (mirror_) mirror_->invalidate();
}

}  // namespace arcreduce
