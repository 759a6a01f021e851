// SGD with momentum (PyTorch's convention): v = momentum * v + g; w -= lr * v.
#pragma once

#include <vector>

#include "mlp.h"

namespace fmnist {

class SgdMomentum {
 public:
  SgdMomentum(const std::vector<Parameter>& params, double lr, double momentum);
  // One update from every parameter's grad (already averaged over ranks).
  void step(std::vector<Parameter>& params);
  // One buffer per parameter, same order and sizes: saved and restored by checkpoints.
  std::vector<std::vector<float>>& velocity() { return velocity_; }
  const std::vector<std::vector<float>>& velocity() const { return velocity_; }

 private:
  float lr_, momentum_;
  std::vector<std::vector<float>> velocity_;
};

}  // namespace fmnist
