// StateStore files: named compressor state round-trips, version-1 files still load, other
// versions, truncation and corruption are rejected with the file's name.
#include "compressors/tensor_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "arcreduce/status.h"

namespace arcreduce {
namespace {

using ::testing::HasSubstr;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tensor_state_test." + name;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

template <typename T>
void put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(StateStore, NamedCompressorStateRoundTrips) {
  StateStore store;
  TensorState& s = store.get("w", 3);
  s.compressed_steps = 7;
  s.e = {1, 2, 3};
  s.floats["oktopk.residual"] = {0.5f, -1.0f, 0.0f};
  s.floats["empty"] = {};
  s.int64s["oktopk.boundaries"] = {0, int64_t{1} << 40, 3};
  s.doubles["oktopk.gthr"] = {0.125};
  store.get("other", 0).int64s["x.calls"] = {-5};
  const std::string path = temp_path("roundtrip");
  store.save(path, 1, 4);
  StateStore loaded;
  loaded.load(path, 1, 4);
  TensorState& l = loaded.get("w", 3);
  EXPECT_EQ(l.compressed_steps, 7u);
  EXPECT_EQ(l.e, s.e);
  EXPECT_EQ(l.floats, s.floats);
  EXPECT_EQ(l.int64s, s.int64s);
  EXPECT_EQ(l.doubles, s.doubles);
  EXPECT_EQ(loaded.get("other", 0).int64s["x.calls"], std::vector<int64_t>{-5});
  // Saving the loaded state reproduces the file byte for byte.
  loaded.save(path + ".2", 1, 4);
  EXPECT_EQ(read_file(path), read_file(path + ".2"));
  std::remove(path.c_str());
  std::remove((path + ".2").c_str());
}

TEST(StateStore, ReadsVersionOneFiles) {
  std::string bytes = "ARCSTATE";
  put<uint32_t>(&bytes, 1);
  put<int32_t>(&bytes, 0);
  put<int32_t>(&bytes, 2);
  put<uint64_t>(&bytes, 1);
  put<uint64_t>(&bytes, 1);
  bytes += "t";
  put<uint64_t>(&bytes, 2);  // elements
  put<uint64_t>(&bytes, 4);  // reductions
  put<uint64_t>(&bytes, 3);  // compressed steps
  put<uint8_t>(&bytes, 1);   // ef started
  put<uint64_t>(&bytes, 2);  // e
  put<float>(&bytes, 1.5f);
  put<float>(&bytes, -2.0f);
  for (int i = 0; i < 3; ++i) put<uint64_t>(&bytes, 0);  // h, hbar, v
  put<uint64_t>(&bytes, fnv1a(bytes));
  const std::string path = temp_path("v1");
  write_file(path, bytes);
  StateStore store;
  store.load(path, 0, 2);
  TensorState& s = store.get("t", 2);
  EXPECT_EQ(s.compressed_steps, 3u);
  EXPECT_EQ(s.e, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_TRUE(s.floats.empty());
  std::remove(path.c_str());
}

TEST(StateStore, RejectsOtherVersionsTruncationAndCorruption) {
  StateStore store;
  store.get("w", 2).floats["oktopk.residual"] = {1, 2};
  const std::string path = temp_path("bad");
  store.save(path, 0, 1);
  const std::string good = read_file(path);
  StateStore loaded;

  std::string future = good;
  const uint32_t version = 3;
  std::memcpy(&future[8], &version, sizeof(version));
  future.resize(future.size() - 8);
  put<uint64_t>(&future, fnv1a(future));
  write_file(path, future);
  EXPECT_THAT(message_of([&] { loaded.load(path, 0, 1); }), HasSubstr("file version 3"));

  std::string cut = good.substr(0, good.size() - 20);
  put<uint64_t>(&cut, fnv1a(cut));
  write_file(path, cut);
  EXPECT_THAT(message_of([&] { loaded.load(path, 0, 1); }), HasSubstr(path));

  std::string flipped = good;
  flipped[flipped.size() - 12] ^= 1;
  write_file(path, flipped);
  EXPECT_THAT(message_of([&] { loaded.load(path, 0, 1); }), HasSubstr("checksum"));
  std::remove(path.c_str());
}

// A mirror that keeps tensor "w"'s residual elsewhere, as the CUDA path keeps it on the device.
class RecordingMirror : public StateMirror {
 public:
  std::vector<float> residual = {1.5f, -2.0f, 0.25f};
  int write_backs = 0, invalidations = 0;
  void write_back(StateStore& store) override {
    ++write_backs;
    store.get("w", residual.size()).e = residual;
  }
  void invalidate() override { ++invalidations; }
};

TEST(StateStore, MirrorWritesBackBeforeSaveAndIsInvalidatedByLoad) {
  const std::string path = temp_path("mirror");
  StateStore store;
  store.get("w", 3).ef_started = true;
  RecordingMirror mirror;
  store.write_back_mirror();  // no mirror yet: nothing happens
  store.set_mirror(&mirror);
  store.write_back_mirror();
  EXPECT_EQ(mirror.write_backs, 1);
  store.save(path, 0, 2);

  StateStore loaded;
  RecordingMirror other;
  loaded.set_mirror(&other);
  loaded.load(path, 0, 2);
  EXPECT_EQ(other.invalidations, 1);
  EXPECT_EQ(other.write_backs, 0);
  // The saved file holds the mirrored residual, not the store's empty vector of before.
  EXPECT_EQ(loaded.get("w", 3).e, mirror.residual);
  EXPECT_TRUE(loaded.get("w", 3).ef_started);

  loaded.set_mirror(nullptr);  // detached: load no longer reaches it
  loaded.load(path, 0, 2);
  EXPECT_EQ(other.invalidations, 1);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace arcreduce
