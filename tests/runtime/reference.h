// Naive references for reduction tests: deterministic per-rank inputs, expected sums/means in
// double, and conversions to and from every dtype.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "arcreduce/types.h"
#include "ops/half.h"

namespace arcreduce {
namespace testing {

// Small integers, exact in every dtype and in sums of up to 8 ranks (|sum| <= 8 * 16).
inline double input_value(int rank, int tensor, size_t i) {
  return static_cast<double>(static_cast<int64_t>((i * 7 + tensor * 13 + rank * 5) % 33) - 16);
}

inline double expected_value(int size, int tensor, size_t i, ReduceOp op) {
  double sum = 0;
  for (int r = 0; r < size; ++r) sum += input_value(r, tensor, i);
  return op == ReduceOp::kAverage ? sum / size : sum;
}

// Holds one tensor's storage in its dtype.
struct HostTensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor(DType d, std::vector<int64_t> s) : dtype(d), shape(std::move(s)) {
    bytes.resize(static_cast<size_t>(num_elements(shape)) * dtype_size(dtype));
  }
  size_t count() const { return static_cast<size_t>(num_elements(shape)); }
  Tensor view() { return Tensor{bytes.empty() ? nullptr : bytes.data(), dtype, shape}; }

  void set(size_t i, double v) {
    switch (dtype) {
      case DType::kFloat32:
        reinterpret_cast<float*>(bytes.data())[i] = static_cast<float>(v);
        break;
      case DType::kFloat64:
        reinterpret_cast<double*>(bytes.data())[i] = v;
        break;
      case DType::kFloat16:
        reinterpret_cast<uint16_t*>(bytes.data())[i] = float_to_fp16(static_cast<float>(v));
        break;
      case DType::kBFloat16:
        reinterpret_cast<uint16_t*>(bytes.data())[i] = float_to_bf16(static_cast<float>(v));
        break;
      default:  // integer dtypes: broadcast only
        break;
    }
  }
  double get(size_t i) const {
    switch (dtype) {
      case DType::kFloat32:
        return reinterpret_cast<const float*>(bytes.data())[i];
      case DType::kFloat64:
        return reinterpret_cast<const double*>(bytes.data())[i];
      case DType::kFloat16:
        return fp16_to_float(reinterpret_cast<const uint16_t*>(bytes.data())[i]);
      case DType::kBFloat16:
        return bf16_to_float(reinterpret_cast<const uint16_t*>(bytes.data())[i]);
      default:  // integer dtypes: broadcast only
        break;
    }
    return 0;
  }
};

// Allowed |result - expected| for a mean/sum whose magnitude is at most `scale`: the reference is
// exact; fp16/bf16 round the pre-scaled inputs and each of the N-1 partial sums once
// (unit roundoff 2^-11 and 2^-8), fp32 and fp64 only the final division.
inline double tolerance(DType dtype, int size, double scale) {
  double u = dtype == DType::kFloat16    ? std::ldexp(1.0, -11)
             : dtype == DType::kBFloat16 ? std::ldexp(1.0, -8)
             : dtype == DType::kFloat32  ? std::ldexp(1.0, -24)
                                         : std::ldexp(1.0, -53);
  return (size + 1) * u * (scale + 1);
}

}  // namespace testing
}  // namespace arcreduce
