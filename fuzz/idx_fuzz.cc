// Fuzz target: the IDX reader of examples/03_fashion_mnist (idx_file.h), which reads gzip'd or
// plain files. Input: the first byte picks the dimensions expected (1: labels, 3: images) and
// the rest is written to a temporary file, read with the example's item limit (60,000).
// Contract: read_idx() returns dims[0] items, at most the limit, and exactly
// dims[0] * dims[1] * ... bytes, or throws DataError naming the file; it never allocates much
// more than the file can fill (libFuzzer's -rss_limit_mb and -malloc_limit_mb catch that).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "examples/03_fashion_mnist/idx_file.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using arcreduce::fuzz::check;
  if (size == 0) return 0;
  static const std::string path =
      "/tmp/arcreduce-idx-fuzz-" + std::to_string(static_cast<long>(getpid())) + ".idx";
  const size_t dims = data[0] % 2 == 0 ? 1 : 3;
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    check(f != nullptr, "cannot write " + path);
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);
  }
  constexpr uint32_t kMaxItems = 60000;
  try {
    const fmnist::IdxArray array = fmnist::read_idx(path, dims, kMaxItems);
    check(array.dims.size() == dims, "wrong number of dimensions returned");
    check(array.dims[0] >= 1 && array.dims[0] <= kMaxItems, "item count out of range");
    uint64_t bytes = 1;
    for (uint32_t d : array.dims) bytes *= d;
    check(array.data.size() == bytes, "data size disagrees with the dimensions");
  } catch (const fmnist::DataError& e) {
    arcreduce::fuzz::check_message(e.what(), "read_idx()");
    check(std::string(e.what()).find(path) != std::string::npos,
          std::string("an IDX error does not name the file: ") + e.what());
  }
  std::remove(path.c_str());
  return 0;
}
