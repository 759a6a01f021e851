#include "bench/gradient_sets.h"

#include <stdexcept>
#include <utility>

namespace arcreduce::bench {

int64_t TensorSpec::elements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

int64_t GradientSet::elements() const {
  int64_t n = 0;
  for (const TensorSpec& t : tensors) n += t.elements();
  return n;
}

GradientSet tiny_transformer_24m() {
  constexpr int64_t kBlocks = 12, kHidden = 384, kMlp = 4 * kHidden, kVocab = 8192;
  GradientSet set{"tiny-transformer-24M", {}};
  auto add = [&set](std::string name, std::vector<int64_t> shape) {
    set.tensors.push_back({std::move(name), std::move(shape)});
  };
  // Forward order inside a block is ln1, qkv, proj, ln2, mlp.fc1, mlp.fc2; backward reverses it.
  for (int64_t b = kBlocks - 1; b >= 0; --b) {
    const std::string p = "blocks." + std::to_string(b) + ".";
    add(p + "mlp.fc2.bias", {kHidden});
    add(p + "mlp.fc2.weight", {kMlp, kHidden});
    add(p + "mlp.fc1.bias", {kMlp});
    add(p + "mlp.fc1.weight", {kHidden, kMlp});
    add(p + "ln2.bias", {kHidden});
    add(p + "ln2.weight", {kHidden});
    add(p + "attn.proj.bias", {kHidden});
    add(p + "attn.proj.weight", {kHidden, kHidden});
    add(p + "attn.qkv.bias", {3 * kHidden});
    add(p + "attn.qkv.weight", {kHidden, 3 * kHidden});
    add(p + "ln1.bias", {kHidden});
    add(p + "ln1.weight", {kHidden});
  }
  add("embedding.weight", {kVocab, kHidden});
  return set;
}

GradientSet gradient_set(const std::string& name) {
  if (name == "tiny-transformer-24M") return tiny_transformer_24m();
  throw std::invalid_argument("unknown gradient set '" + name + "' (known: tiny-transformer-24M)");
}

}  // namespace arcreduce::bench
