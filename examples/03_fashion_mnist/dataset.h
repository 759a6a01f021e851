// Fashion-MNIST in memory, and how each rank picks its share of it.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace fmnist {

constexpr int64_t kImagePixels = 28 * 28;
constexpr int kClasses = 10;
// Debian's dataset-fashion-mnist package.
constexpr char kDefaultDataDir[] = "/usr/share/datasets/fashion-mnist";

struct Split {
  std::vector<uint8_t> images;  // count x 784 pixels, 0..255
  std::vector<uint8_t> labels;  // count labels, 0..9
  int64_t count = 0;
};

struct Dataset {
  Split train, test;
};

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir`, at most `max_train` /
// `max_test` examples of each. Throws DataError naming the file (missing, malformed, 28x28
// images expected, labels in 0..9, as many labels as images).
Dataset load_fashion_mnist(const std::string& dir, int64_t max_train, int64_t max_test);

// Copies examples `indices` of `split` into `x` (n x 784, normalised with the training set's
// mean and standard deviation) and `y` (n labels).
void gather_batch(const Split& split, const int64_t* indices, int64_t n, std::vector<float>& x,
                  std::vector<int>& y);

// Data-parallel sharding of the training set, like PyTorch's DistributedSampler with
// drop_last: every epoch all ranks draw the same permutation of the examples from the shared
// generator (same seed on every rank), cut it into global batches of size * batch_size, and
// rank r takes the r-th slice of batch_size examples of each. Examples left over after the
// last full global batch are skipped that epoch (a different set each epoch).
class Sharder {
 public:
  Sharder(int64_t examples, int64_t batch_size, int rank, int size);

  int64_t steps_per_epoch() const { return steps_; }
  // Draws the next epoch's permutation from `engine` (advancing it); a function of the
  // engine's state only.
  void shuffle(std::mt19937_64& engine);
  // This rank's examples of `step` (0-based) in the current epoch: batch_size indices.
  const int64_t* batch(int64_t step) const;

 private:
  std::vector<int64_t> order_;
  int64_t batch_size_;
  int rank_, size_;
  int64_t steps_;
};

}  // namespace fmnist
