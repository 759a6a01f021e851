// A multi-layer perceptron with ReLU activations and a softmax cross-entropy loss, forward and
// backward written out by hand over the kernels of matmul.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fmnist {

// One trainable tensor: its value, its gradient (written by backward, then averaged in place by
// arcreduce) and the name and shape it is reduced under.
struct Parameter {
  std::string name;            // "fc1.weight", "fc1.bias", ...: identical on every rank
  std::vector<int64_t> shape;  // weights {in, out} (rows = inputs), biases {out}
  std::vector<float> value;
  std::vector<float> grad;
};

class Mlp {
 public:
  // widths = {784, hidden..., 10}. Weights drawn He-uniform from `seed` (the same on every
  // rank, so all ranks start from the same model), biases zero.
  Mlp(std::vector<int64_t> widths, uint64_t seed);

  const std::vector<int64_t>& widths() const { return widths_; }
  // fc1.weight, fc1.bias, fc2.weight, ...: forward order.
  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  int64_t parameter_count() const;

  // Forward pass of `batch` examples x (batch x 784) with labels y; keeps what backward needs.
  // Returns the mean cross-entropy loss.
  double forward(const float* x, const int* y, int64_t batch);
  // Gradients of the last forward's mean loss, last layer first. `on_gradient(index)` is called
  // as soon as parameters()[index].grad is final, so it can be handed to communication while
  // the remaining layers are differentiated; the callee must not touch values() until the
  // optimizer step. grad buffers are overwritten (not accumulated).
  void backward(const std::function<void(size_t)>& on_gradient);
  // Number of examples among `batch` whose largest logit is the label.
  int64_t count_correct(const float* x, const int* y, int64_t batch);

 private:
  void forward_layers(const float* x, int64_t batch);

  std::vector<int64_t> widths_;
  std::vector<Parameter> params_;
  // Per layer l: acts_[l] is the layer's input (acts_[0] the batch), acts_[L] the logits.
  std::vector<std::vector<float>> acts_;
  std::vector<float> probs_;  // softmax of the logits
  std::vector<int> labels_;
  int64_t batch_ = 0;
  // Backward scratch: the output gradient, its transpose, the input gradient's transpose.
  std::vector<float> dz_, dz_t_, da_t_, da_;
};

}  // namespace fmnist
