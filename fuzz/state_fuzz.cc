// Fuzz target: compressor/error-feedback state files (StateStore::load, docs/compressors.md
// "State files"). Input: the first byte's low bit says whether to append the file's correct
// FNV-1a checksum to the rest (so that mutations reach the body, not only the checksum test);
// the rank and world size passed are those of the header when it has them.
// Contract: load() accepts, or throws Error naming the file. An accepted file round-trips
// (save, load, save gives the same bytes), keeps every tensor it lists (no silently dropped
// duplicate), and holds buffers that the compressors may index by the tensor's element count
// (each error-feedback buffer is empty or exactly `elements` long).
#include <cstring>
#include <string>

#include "arcreduce/status.h"
#include "compressors/tensor_state.h"
#include "fuzz/fuzz_support.h"

namespace {

using arcreduce::fuzz::check;

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arcreduce;
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    const uint64_t sum = fnv1a(bytes);
    bytes.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  }
  int32_t rank = 0, world = 1;
  if (bytes.size() >= 20) {
    std::memcpy(&rank, bytes.data() + 12, sizeof(rank));
    std::memcpy(&world, bytes.data() + 16, sizeof(world));
  }
  StateStore store;
  try {
    store.load_bytes(bytes, "state.bin", rank, world);
  } catch (const Error& e) {
    fuzz::check_message(e.what(), "load_state");
    check(std::strstr(e.what(), "state.bin") != nullptr,
          std::string("a load_state error does not name the file: ") + e.what());
    return 0;
  }
  uint64_t listed = 0;
  if (bytes.size() >= 28) std::memcpy(&listed, bytes.data() + 20, sizeof(listed));
  check(store.tensor_count() == listed, "load_state kept " + std::to_string(store.tensor_count()) +
                                            " of " + std::to_string(listed) + " tensors listed");
  store.for_each([](const std::string& name, const TensorState& s) {
    for (const std::vector<float>* buffer : {&s.e, &s.h, &s.hbar, &s.v}) {
      check(buffer->empty() || buffer->size() == s.elements,
            "tensor '" + name + "': a buffer of " + std::to_string(buffer->size()) +
                " entries for " + std::to_string(s.elements) + " elements was accepted");
    }
  });
  const std::string saved = store.save_bytes(rank, world);
  StateStore again;
  try {
    again.load_bytes(saved, "state.bin", rank, world);
  } catch (const Error& e) {
    check(false, std::string("a saved state does not load again: ") + e.what());
  }
  check(again.save_bytes(rank, world) == saved, "save/load/save is not stable");
  return 0;
}
