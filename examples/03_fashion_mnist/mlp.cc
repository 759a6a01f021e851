#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "matmul.h"

namespace fmnist {
namespace {

// Uniform in [-bound, bound) from the engine's raw bits (identical with every standard library).
float uniform(std::mt19937_64& engine, float bound) {
  const double unit = static_cast<double>(engine() >> 11) * 0x1.0p-53;
  return static_cast<float>((2 * unit - 1) * bound);
}

}  // namespace

Mlp::Mlp(std::vector<int64_t> widths, uint64_t seed) : widths_(std::move(widths)) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), 0x6d6c70u};
  std::mt19937_64 engine(seq);
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    const int64_t in = widths_[l], out = widths_[l + 1];
    const std::string layer = "fc" + std::to_string(l + 1);
    Parameter w{layer + ".weight", {in, out}, std::vector<float>(in * out), {}};
    const float bound = std::sqrt(6.0f / static_cast<float>(in));  // He-uniform, for ReLU
    for (float& v : w.value) v = uniform(engine, bound);
    w.grad.resize(w.value.size());
    params_.push_back(std::move(w));
    params_.push_back(
        {layer + ".bias", {out}, std::vector<float>(out, 0.0f), std::vector<float>(out)});
  }
  acts_.resize(widths_.size());
}

int64_t Mlp::parameter_count() const {
  int64_t n = 0;
  for (const Parameter& p : params_) n += static_cast<int64_t>(p.value.size());
  return n;
}

void Mlp::forward_layers(const float* x, int64_t batch) {
  batch_ = batch;
  acts_[0].assign(x, x + batch * widths_[0]);
  const size_t layers = widths_.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const int64_t in = widths_[l], out = widths_[l + 1];
    const std::vector<float>& w = params_[2 * l].value;
    const std::vector<float>& b = params_[2 * l + 1].value;
    std::vector<float>& z = acts_[l + 1];
    z.resize(static_cast<size_t>(batch * out));
    gemm(batch, out, in, acts_[l].data(), in, 1, w.data(), out, z.data(), out, false);
    const bool relu = l + 1 < layers;  // no activation on the logits
    for (int64_t i = 0; i < batch; ++i) {
      float* row = &z[static_cast<size_t>(i * out)];
      for (int64_t j = 0; j < out; ++j) {
        const float v = row[j] + b[j];
        row[j] = relu ? std::max(v, 0.0f) : v;
      }
    }
  }
}

double Mlp::forward(const float* x, const int* y, int64_t batch) {
  forward_layers(x, batch);
  const int64_t classes = widths_.back();
  const std::vector<float>& logits = acts_.back();
  probs_.resize(logits.size());
  labels_.assign(y, y + batch);
  double loss = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = &logits[static_cast<size_t>(i * classes)];
    float* p = &probs_[static_cast<size_t>(i * classes)];
    const float top = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) {
      p[j] = std::exp(row[j] - top);
      sum += p[j];
    }
    for (int64_t j = 0; j < classes; ++j) p[j] = static_cast<float>(p[j] / sum);
    loss += std::log(sum) + top - row[y[i]];  // -log softmax(row)[y]
  }
  return loss / static_cast<double>(batch);
}

void Mlp::backward(const std::function<void(size_t)>& on_gradient) {
  const int64_t batch = batch_;
  const size_t layers = widths_.size() - 1;
  // d(mean loss)/d(logits) = (softmax - one_hot) / batch.
  dz_ = probs_;
  const int64_t classes = widths_.back();
  for (int64_t i = 0; i < batch; ++i) dz_[static_cast<size_t>(i * classes + labels_[i])] -= 1.0f;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (float& v : dz_) v *= inv_batch;

  for (size_t l = layers; l-- > 0;) {
    const int64_t in = widths_[l], out = widths_[l + 1];
    Parameter& w = params_[2 * l];
    Parameter& b = params_[2 * l + 1];
    // dW = input^T * dz: A = acts_[l] read transposed (row stride 1, column stride in).
    gemm(in, out, batch, acts_[l].data(), 1, in, dz_.data(), out, w.grad.data(), out, false);
    std::fill(b.grad.begin(), b.grad.end(), 0.0f);
    for (int64_t i = 0; i < batch; ++i) {
      const float* row = &dz_[static_cast<size_t>(i * out)];
      for (int64_t j = 0; j < out; ++j) b.grad[j] += row[j];
    }
    on_gradient(2 * l);
    on_gradient(2 * l + 1);
    if (l == 0) break;  // no gradient for the input
    // d(input) = dz * W^T, computed as (W * dz^T)^T so that both operands are read row-wise:
    // transposing the small batch-sized matrices is cheaper than transposing W.
    dz_t_.resize(dz_.size());
    transpose(dz_.data(), batch, out, dz_t_.data());
    da_t_.resize(static_cast<size_t>(in * batch));
    gemm(in, batch, out, w.value.data(), out, 1, dz_t_.data(), batch, da_t_.data(), batch, false);
    da_.resize(da_t_.size());
    transpose(da_t_.data(), in, batch, da_.data());
    // Through the ReLU: the input of layer l is relu(z), so its derivative is (input > 0).
    const std::vector<float>& a = acts_[l];
    for (size_t i = 0; i < da_.size(); ++i) da_[i] = a[i] > 0 ? da_[i] : 0.0f;
    dz_.swap(da_);
  }
}

int64_t Mlp::count_correct(const float* x, const int* y, int64_t batch) {
  forward_layers(x, batch);
  const int64_t classes = widths_.back();
  int64_t correct = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = &acts_.back()[static_cast<size_t>(i * classes)];
    correct += std::max_element(row, row + classes) - row == y[i];
  }
  return correct;
}

}  // namespace fmnist
