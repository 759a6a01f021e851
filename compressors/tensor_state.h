// Per-tensor compressor state of one rank, keyed by tensor name (buckets change from step to
// step; names do not): step counters, error-feedback buffers in fp32, and named buffers that any
// compressor may keep. save()/load() write and read all of it (docs/compressors.md, "State
// files").
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace arcreduce {

struct TensorState {
  size_t elements = 0;
  uint64_t reductions = 0;        // every reduction (counts warm-up steps)
  uint64_t compressed_steps = 0;  // compressed reductions: keys the shared randomness
  bool ef_started = false;        // error feedback has seen this tensor
  std::vector<float> e;           // ef14 residual
  std::vector<float> h;           // ef21/ef21m local estimate h_i
  std::vector<float> hbar;        // ef21/ef21m global estimate (equal on all ranks)
  std::vector<float> v;           // ef21m momentum

  // Compressor-owned state, saved and loaded with the rest without changing this struct or the
  // file format: fp32 buffers, int64 and double vectors, each under a name prefixed by its
  // owner ("oktopk.residual"). An absent name reads as an empty vector; a compressor sizes its
  // entries itself (the element count above is the tensor's).
  std::map<std::string, std::vector<float>> floats;
  std::map<std::string, std::vector<int64_t>> int64s;
  std::map<std::string, std::vector<double>> doubles;
};

class StateStore;

// TensorState buffers kept elsewhere between steps: the CUDA path keeps the error feedback of
// CUDA tensors in device memory (docs/cuda.md) and only their counters and flags here. Both
// calls come with the store's mutex held, from any thread.
class StateMirror {
 public:
  virtual ~StateMirror() = default;
  // Copies the mirrored buffers into the store's TensorStates (before save()). Throws Error.
  virtual void write_back(StateStore& store) = 0;
  // load() replaced the store's buffers: the mirror re-reads them before it next uses its own.
  virtual void invalidate() = 0;
};

class StateStore {
 public:
  // The state of `name`. A tensor whose element count changed starts over, except when its
  // state came from load(): then the file belongs to another model and this throws Error.
  TensorState& get(const std::string& name, size_t elements);

  // Throws Error with the path and the reason on I/O failure. Format: magic, version, rank,
  // world size, tensor count, per tensor (name, counters, buffers, named compressor state),
  // FNV-1a checksum.
  void save(const std::string& path, int rank, int size) const;
  // Replaces all state. Reads this version and version 1 (no named compressor state). Rejects a
  // file of another rank or world size, another version, a
  // corrupted or truncated file. Tensors submitted later that the file does not know are an
  // error (another tensor set), unless the file was empty.
  void load(const std::string& path, int rank, int size);
  // save() and load() without the file: the file's bytes, and `path` only for messages.
  std::string save_bytes(int rank, int size) const;
  void load_bytes(const std::string& bytes, const std::string& path, int rank, int size);

  size_t tensor_count() const { return states_.size(); }
  // Calls f(name, state) for every tensor, in name order.
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& kv : states_) f(kv.first, kv.second);
  }

  std::mutex& mutex() const { return mutex_; }

  // One mirror at a time (null detaches); the caller holds the mutex.
  void set_mirror(StateMirror* mirror) { mirror_ = mirror; }
  // Brings the mirrored buffers into the store, if there is a mirror; the caller holds the mutex.
  void write_back_mirror() {
    if (mirror_) mirror_->write_back(*this);
  }

 private:
  std::map<std::string, TensorState> states_;
  bool loaded_ = false;  // states_ came from a file
  StateMirror* mirror_ = nullptr;
  mutable std::mutex mutex_;
};

}  // namespace arcreduce
