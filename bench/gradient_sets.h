// Named gradient sets that the benchmarks reduce (BENCHMARKS.md, "The gradient sets").
// A set lists one model's parameter tensors in backward order: the order in which a framework's
// gradient hooks hand them to the runtime (last layer first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arcreduce::bench {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // row-major
  int64_t elements() const;
};

struct GradientSet {
  std::string name;
  std::vector<TensorSpec> tensors;  // backward order
  int64_t elements() const;         // over all tensors
};

// 12 pre-LayerNorm transformer blocks of hidden 384 (fused QKV 384x1152, output projection
// 384x384, MLP 384x1536 and 1536x384, biases, two LayerNorms) and a 8192x384 token embedding:
// 145 fp32 tensors, 24,439,296 parameters (97.8 MB).
GradientSet tiny_transformer_24m();

// The set called `name`; throws std::invalid_argument listing the known names.
GradientSet gradient_set(const std::string& name);

}  // namespace arcreduce::bench
