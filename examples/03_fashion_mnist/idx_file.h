// Reader of the IDX files MNIST and Fashion-MNIST ship (http://yann.lecun.com/exdb/mnist/):
// a big-endian header (magic 0x00000800 | type << 8 | dims, then one uint32 per dimension)
// followed by the row-major data. Only unsigned-byte data (type 0x08) is accepted.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fmnist {

// Malformed, truncated or missing files; the message names the file and what is wrong.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct IdxArray {
  std::vector<uint32_t> dims;  // dims[0] = number of items
  std::vector<uint8_t> data;   // the first `items` items, row-major
};

// Reads `path`, gzip-compressed or not (zlib detects which). Checks the magic number, that the
// array has `expected_dims` dimensions and that the file holds every item the header announces.
// Reads at most `max_items` items (the rest of the file is not decompressed) and returns
// dims[0] = the number read. Throws DataError.
IdxArray read_idx(const std::string& path, size_t expected_dims, uint32_t max_items);

}  // namespace fmnist
