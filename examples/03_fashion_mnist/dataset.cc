#include "dataset.h"

#include "idx_file.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <numeric>

namespace fmnist {
namespace {

// Per-pixel statistics of the Fashion-MNIST training set (pixels scaled to [0, 1]).
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;

// The gzip'd file Debian and the original site ship, or the same file decompressed.
std::string find_file(const std::string& dir, const std::string& name) {
  const std::string base = dir + "/" + name;
  for (const std::string& candidate : {base + ".gz", base}) {
    if (std::ifstream(candidate).good()) return candidate;
  }
  throw DataError("Fashion-MNIST file " + name + "[.gz] not found in " + dir +
                  " (Debian: apt-get install dataset-fashion-mnist, which "
                  "scripts/install-deps.sh does; or pass --data-dir)");
}

Split load_split(const std::string& dir, const std::string& prefix, int64_t max_count) {
  const uint32_t limit = static_cast<uint32_t>(std::min<int64_t>(max_count, UINT32_MAX));
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  IdxArray images = read_idx(images_path, 3, limit);
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray labels = read_idx(labels_path, 1, limit);
  if (images.dims[1] != 28 || images.dims[2] != 28) {
    throw DataError(images_path + ": images are " + std::to_string(images.dims[1]) + "x" +
                    std::to_string(images.dims[2]) + ", expected 28x28");
  }
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(labels_path + " holds " + std::to_string(labels.dims[0]) + " labels but " +
                    images_path + " " + std::to_string(images.dims[0]) + " images");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kClasses) {
      throw DataError(labels_path + ": label " + std::to_string(labels.data[i]) + " of example " +
                      std::to_string(i) + " is not a class 0..9");
    }
  }
  Split split;
  split.count = images.dims[0];
  split.images = std::move(images.data);
  split.labels = std::move(labels.data);
  return split;
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, int64_t max_train, int64_t max_test) {
  Dataset d;
  d.train = load_split(dir, "train", max_train);
  d.test = load_split(dir, "t10k", max_test);
  return d;
}

void gather_batch(const Split& split, const int64_t* indices, int64_t n, std::vector<float>& x,
                  std::vector<int>& y) {
  x.resize(static_cast<size_t>(n * kImagePixels));
  y.resize(static_cast<size_t>(n));
  constexpr float kScale = 1.0f / (255.0f * kStd);
  constexpr float kShift = kMean / kStd;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* src = &split.images[static_cast<size_t>(indices[i] * kImagePixels)];
    float* dst = &x[static_cast<size_t>(i * kImagePixels)];
    for (int64_t p = 0; p < kImagePixels; ++p) dst[p] = src[p] * kScale - kShift;
    y[i] = split.labels[static_cast<size_t>(indices[i])];
  }
}

Sharder::Sharder(int64_t examples, int64_t batch_size, int rank, int size)
    : order_(static_cast<size_t>(examples)),
      batch_size_(batch_size),
      rank_(rank),
      size_(size),
      steps_(examples / (batch_size * size)) {
  std::iota(order_.begin(), order_.end(), int64_t{0});
}

void Sharder::shuffle(std::mt19937_64& engine) {
  // Fisher-Yates on the engine's raw output, so the permutation is the same with every standard
  // library (std::shuffle's is implementation-defined). The modulo bias is below 2^-47. Each
  // epoch starts from the identity, so the order depends on the engine's state alone (which
  // checkpoints restore), not on the previous epochs' orders.
  std::iota(order_.begin(), order_.end(), int64_t{0});
  for (size_t i = order_.size(); i > 1; --i) {
    const auto j = static_cast<size_t>(engine() % i);
    std::swap(order_[i - 1], order_[j]);
  }
}

const int64_t* Sharder::batch(int64_t step) const {
  return &order_[static_cast<size_t>((step * size_ + rank_) * batch_size_)];
}

}  // namespace fmnist
