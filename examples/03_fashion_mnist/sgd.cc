#include "sgd.h"

namespace fmnist {

SgdMomentum::SgdMomentum(const std::vector<Parameter>& params, double lr, double momentum)
    : lr_(static_cast<float>(lr)), momentum_(static_cast<float>(momentum)) {
  for (const Parameter& p : params) velocity_.emplace_back(p.value.size(), 0.0f);
}

void SgdMomentum::step(std::vector<Parameter>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    float* w = params[i].value.data();
    const float* g = params[i].grad.data();
    float* v = velocity_[i].data();
    const size_t n = params[i].value.size();
    if (momentum_ == 0.0f) {
      // Plain SGD (under efm the runtime carries the momentum): v would only be a copy of g,
      // and skipping it saves two of the five passes over the parameters' size.
      for (size_t j = 0; j < n; ++j) w[j] -= lr_ * g[j];
      continue;
    }
    for (size_t j = 0; j < n; ++j) {
      v[j] = momentum_ * v[j] + g[j];
      w[j] -= lr_ * v[j];
    }
  }
}

}  // namespace fmnist
