#include "checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include <arcreduce/arcreduce.h>

namespace fmnist {
namespace {

constexpr char kMagic[8] = {'F', 'M', 'N', 'I', 'S', 'T', 'C', 'K'};
constexpr uint32_t kVersion = 1;

uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 0x100000001b3ull;
  return hash;
}

// Appends plain values in host byte order (checkpoints are not portable across endianness).
class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_string(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    out_ += s;
  }
  void put_floats(const std::vector<float>& v) {
    put(static_cast<uint64_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : in_(bytes), path_(path) {}
  template <typename T>
  T get() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_string() {
    const auto n = get<uint64_t>();
    need(n);
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // Reads a float array that must have exactly `expected` elements (`what` names it).
  void get_floats(std::vector<float>& v, const std::string& what) {
    const auto n = get<uint64_t>();
    if (n != v.size()) {
      throw CheckpointError(path_ + ": " + what + " has " + std::to_string(n) +
                            " elements, the model " + std::to_string(v.size()));
    }
    need(n * sizeof(float));
    std::memcpy(v.data(), in_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
  }

 private:
  void need(uint64_t n) const {
    if (n > in_.size() - pos_) throw CheckpointError(path_ + ": the file is truncated");
  }
  const std::string& in_;
  const std::string& path_;
  size_t pos_ = 0;
};

void put_settings(Writer& w, const RunSettings& s) {
  w.put(static_cast<int32_t>(s.rank));
  w.put(static_cast<int32_t>(s.size));
  w.put(s.seed);
  w.put(s.batch_size);
  w.put(s.train_examples);
  w.put(static_cast<uint64_t>(s.widths.size()));
  for (int64_t width : s.widths) w.put(width);
  w.put_string(s.compressor);
  w.put(s.ratio);
  w.put_string(s.error_feedback);
  w.put(s.lr);
  w.put(s.momentum);
}

RunSettings get_settings(Reader& r) {
  RunSettings s;
  s.rank = r.get<int32_t>();
  s.size = r.get<int32_t>();
  s.seed = r.get<uint64_t>();
  s.batch_size = r.get<int64_t>();
  s.train_examples = r.get<int64_t>();
  const auto widths = r.get<uint64_t>();
  for (uint64_t i = 0; i < widths && i < 64; ++i) s.widths.push_back(r.get<int64_t>());
  s.compressor = r.get_string();
  s.ratio = r.get<double>();
  s.error_feedback = r.get_string();
  s.lr = r.get<double>();
  s.momentum = r.get<double>();
  return s;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// The first setting in which the checkpoint differs from this run, or "".
std::string first_difference(const RunSettings& saved, const RunSettings& now) {
  auto differs = [](const char* what, const std::string& a, const std::string& b) {
    return a == b ? std::string() : std::string(what) + " " + a + " (this run: " + b + ")";
  };
  std::string d;
  if (d.empty()) d = differs("rank", std::to_string(saved.rank), std::to_string(now.rank));
  if (d.empty()) d = differs("ranks", std::to_string(saved.size), std::to_string(now.size));
  if (d.empty()) d = differs("--seed", std::to_string(saved.seed), std::to_string(now.seed));
  if (d.empty())
    d = differs("--batch-size", std::to_string(saved.batch_size), std::to_string(now.batch_size));
  if (d.empty()) {
    d = differs("training examples", std::to_string(saved.train_examples),
                std::to_string(now.train_examples));
  }
  if (d.empty()) d = differs("layer widths", join(saved.widths), join(now.widths));
  if (d.empty()) d = differs("--compressor", saved.compressor, now.compressor);
  if (d.empty() && saved.ratio != now.ratio)
    d = differs("--compress-ratio", std::to_string(saved.ratio), std::to_string(now.ratio));
  if (d.empty()) d = differs("--error-feedback", saved.error_feedback, now.error_feedback);
  if (d.empty() && saved.lr != now.lr)
    d = differs("--lr", std::to_string(saved.lr), std::to_string(now.lr));
  if (d.empty() && saved.momentum != now.momentum)
    d = differs("--momentum", std::to_string(saved.momentum), std::to_string(now.momentum));
  return d;
}

void write_file(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw CheckpointError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw CheckpointError("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
}

}  // namespace

std::string checkpoint_path(const std::string& prefix, int rank) {
  return prefix + ".rank" + std::to_string(rank) + ".ckpt";
}

std::string runtime_state_path(const std::string& prefix, int rank) {
  return prefix + ".rank" + std::to_string(rank) + ".arcreduce";
}

void save_checkpoint(const std::string& prefix, const RunSettings& settings,
                     const TrainingProgress& progress, const std::mt19937_64& shuffle_engine,
                     const Mlp& model, const SgdMomentum& sgd) {
  Writer w;
  w.bytes().append(kMagic, sizeof(kMagic));
  w.put(kVersion);
  put_settings(w, settings);
  w.put(progress.epochs_done);
  w.put(progress.global_step);
  std::ostringstream engine_text;
  engine_text << shuffle_engine;
  w.put_string(engine_text.str());
  const std::vector<Parameter>& params = model.parameters();
  w.put(static_cast<uint64_t>(params.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    w.put_string(params[i].name);
    w.put_floats(params[i].value);
    w.put_floats(sgd.velocity()[i]);
  }
  w.put(fnv1a(w.bytes().data(), w.bytes().size()));
  write_file(checkpoint_path(prefix, settings.rank), w.bytes());
  arcreduce::save_state(runtime_state_path(prefix, settings.rank));
}

void load_checkpoint(const std::string& prefix, const RunSettings& settings,
                     TrainingProgress& progress, std::mt19937_64& shuffle_engine, Mlp& model,
                     SgdMomentum& sgd) {
  const std::string path = checkpoint_path(prefix, settings.rank);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw CheckpointError("cannot open " + path + ": " + std::strerror(errno) +
                          " (was the checkpoint written with this many ranks?)");
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof(kMagic) + sizeof(uint64_t) ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    throw CheckpointError(path + ": not a checkpoint of this example");
  }
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, sizeof(stored));
  if (fnv1a(bytes.data(), body) != stored) {
    throw CheckpointError(path + ": checksum mismatch: the file is corrupted");
  }
  const std::string payload = bytes.substr(sizeof(kMagic), body - sizeof(kMagic));
  Reader r(payload, path);
  const auto version = r.get<uint32_t>();
  if (version != kVersion) {
    throw CheckpointError(path + ": format version " + std::to_string(version) +
                          ", this program reads " + std::to_string(kVersion));
  }
  const std::string difference = first_difference(get_settings(r), settings);
  if (!difference.empty()) {
    throw CheckpointError(path + " was written by a run with other settings: " + difference);
  }
  progress.epochs_done = r.get<int64_t>();
  progress.global_step = r.get<int64_t>();
  std::istringstream engine_text(r.get_string());
  engine_text >> shuffle_engine;
  if (!engine_text) throw CheckpointError(path + ": unreadable generator state");
  std::vector<Parameter>& params = model.parameters();
  if (r.get<uint64_t>() != params.size()) throw CheckpointError(path + ": other parameter set");
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string name = r.get_string();
    if (name != params[i].name) {
      throw CheckpointError(path + ": parameter " + name + " where " + params[i].name +
                            " was expected");
    }
    r.get_floats(params[i].value, name);
    r.get_floats(sgd.velocity()[i], name + " momentum");
  }
  arcreduce::load_state(runtime_state_path(prefix, settings.rank));
}

uint64_t model_hash(const Mlp& model) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const Parameter& p : model.parameters()) {
    hash = fnv1a(p.value.data(), p.value.size() * sizeof(float), hash);
  }
  return hash;
}

}  // namespace fmnist
