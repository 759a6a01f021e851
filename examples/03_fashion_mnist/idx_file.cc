#include "idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace fmnist {
namespace {

constexpr uint32_t kUnsignedByte = 0x08;
constexpr uint32_t kMaxItemBytes = 1u << 24;  // sanity bound on one item (16 MiB)

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly `bytes` bytes or throws, saying what was being read. The read is part of one
// of `whole` bytes (0: the read is the whole) of which `before` came earlier, for the message.
void read_exactly(gzFile file, const std::string& path, void* out, size_t bytes, const char* what,
                  size_t before = 0, size_t whole = 0) {
  auto* dst = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < bytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes - done, 1u << 30));
    const int n = gzread(file, dst + done, chunk);
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      throw DataError(path + ": corrupted gzip data while reading the " + what + " (" + message +
                      ")");
    }
    if (n == 0) {
      throw DataError(path + ": the file is truncated: it ends inside the " + what + " (" +
                      std::to_string(before + done) + " of " +
                      std::to_string(whole != 0 ? whole : bytes) + " bytes read)");
    }
    done += static_cast<size_t>(n);
  }
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx(const std::string& path, size_t expected_dims, uint32_t max_items) {
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) {
    throw DataError("cannot open " + path + ": " +
                    (errno != 0 ? std::strerror(errno) : "out of memory"));
  }
  uint8_t magic[4];
  read_exactly(file.get(), path, magic, sizeof(magic), "IDX header");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != kUnsignedByte || magic[3] != expected_dims) {
    char got[16];
    std::snprintf(got, sizeof(got), "0x%08x", big_endian(magic));
    char want[16];
    std::snprintf(want, sizeof(want), "0x%08x", 0x800u | static_cast<uint32_t>(expected_dims));
    throw DataError(path + ": not an IDX file of unsigned bytes with " +
                    std::to_string(expected_dims) + " dimension(s): magic number " + got +
                    ", expected " + want);
  }
  IdxArray array;
  std::vector<uint8_t> header(4 * expected_dims);
  read_exactly(file.get(), path, header.data(), header.size(), "IDX header");
  uint64_t item_bytes = 1;
  for (size_t d = 0; d < expected_dims; ++d) {
    array.dims.push_back(big_endian(&header[4 * d]));
    if (d > 0) item_bytes *= array.dims[d];
  }
  if (array.dims[0] == 0 || item_bytes == 0 || item_bytes > kMaxItemBytes) {
    throw DataError(path + ": implausible IDX dimensions (" + std::to_string(array.dims[0]) +
                    " items of " + std::to_string(item_bytes) + " bytes)");
  }
  // Items past `max_items` are not decompressed (fast small runs), so a truncated tail is
  // detected only by runs that use it.
  const uint32_t items = std::min(array.dims[0], max_items);
  // The header's counts are not trusted with memory: the array grows as the data arrives, so a
  // short file that announces 60,000 items of 16 MiB fails as truncated instead of allocating.
  const size_t total = static_cast<size_t>(items) * item_bytes;
  constexpr size_t kChunk = size_t{1} << 22;
  while (array.data.size() < total) {
    const size_t done = array.data.size();
    const size_t n = std::min(kChunk, total - done);
    array.data.resize(done + n);
    read_exactly(file.get(), path, array.data.data() + done, n, "data", done, total);
  }
  array.dims[0] = items;
  return array;
}

}  // namespace fmnist
