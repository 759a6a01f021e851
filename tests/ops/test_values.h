// Deterministic inputs and a naive element-by-element reference reduction shared by the ops
// tests. The reference is written from the CollectiveOp contract, not from reduce_kernels.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/communicator.h"
#include "ops/half.h"

namespace arcreduce {
namespace testing {

inline const std::vector<ScalarType>& all_types() {
  static const std::vector<ScalarType> types = {
      ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kBFloat16,
      ScalarType::kInt32,   ScalarType::kInt64,   ScalarType::kUInt8,   ScalarType::kUInt64,
      ScalarType::kInt8,    ScalarType::kInt16};
  return types;
}

inline const std::vector<CollectiveOp>& all_ops() {
  static const std::vector<CollectiveOp> ops = {CollectiveOp::kSum,   CollectiveOp::kMin,
                                                CollectiveOp::kMax,   CollectiveOp::kBitAnd,
                                                CollectiveOp::kBitOr, CollectiveOp::kProd};
  return ops;
}

// `count` elements for `rank`. exact=true gives floats that are multiples of 0.5 in [-16, 16),
// so sums over up to 4 ranks are exact in every float type and independent of order; otherwise
// floats are arbitrary in [-8, 8). Integers span the type's whole range (sums wrap).
inline std::vector<char> make_values(ScalarType type, size_t count, int rank, bool exact,
                                     uint32_t seed = 1) {
  std::mt19937_64 rng(seed * 7919u + static_cast<uint32_t>(rank));
  std::uniform_real_distribution<double> real(-8.0, 8.0);
  std::uniform_int_distribution<int> halves(-32, 31);
  std::vector<char> out(count * scalar_size(type));
  for (size_t i = 0; i < count; ++i) {
    const double v = exact ? halves(rng) * 0.5 : real(rng);
    const uint64_t bits = rng();
    char* p = out.data() + i * scalar_size(type);
    switch (type) {
      case ScalarType::kFloat32: {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case ScalarType::kFloat64:
        std::memcpy(p, &v, 8);
        break;
      case ScalarType::kFloat16: {
        const uint16_t h = float_to_fp16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case ScalarType::kBFloat16: {
        const uint16_t h = float_to_bf16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      default:
        std::memcpy(p, &bits, scalar_size(type));
    }
  }
  return out;
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

template <typename T>
T combine(T a, T b, CollectiveOp op) {
  if (op == CollectiveOp::kMin) return b < a ? b : a;
  if (op == CollectiveOp::kMax) return b > a ? b : a;
  if (op == CollectiveOp::kProd) return a * b;
  return a + b;
}

// acc = acc op x, one element at a time. Bit ops are byte-wise (any type); signed integer sums
// and products are done in the unsigned type (wrap-around; products of narrow types in unsigned
// int, so promotion cannot overflow); fp16/bf16 sums and products in fp32, rounded once.
inline void naive_reduce(std::vector<char>* acc, const std::vector<char>& x, ScalarType type,
                         CollectiveOp op) {
  if (op == CollectiveOp::kBitAnd || op == CollectiveOp::kBitOr) {
    for (size_t i = 0; i < x.size(); ++i) {
      (*acc)[i] = op == CollectiveOp::kBitAnd ? ((*acc)[i] & x[i]) : ((*acc)[i] | x[i]);
    }
    return;
  }
  const size_t n = scalar_size(type);
  for (size_t i = 0; i * n < x.size(); ++i) {
    char* a = acc->data() + i * n;
    const char* b = x.data() + i * n;
    switch (type) {
      case ScalarType::kFloat32:
        store(a, combine(load<float>(a), load<float>(b), op));
        break;
      case ScalarType::kFloat64:
        store(a, combine(load<double>(a), load<double>(b), op));
        break;
      case ScalarType::kFloat16: {
        const float r =
            combine(fp16_to_float(load<uint16_t>(a)), fp16_to_float(load<uint16_t>(b)), op);
        store(a, float_to_fp16(r));
        break;
      }
      case ScalarType::kBFloat16: {
        const float r =
            combine(bf16_to_float(load<uint16_t>(a)), bf16_to_float(load<uint16_t>(b)), op);
        store(a, float_to_bf16(r));
        break;
      }
      case ScalarType::kInt32:
        if (op == CollectiveOp::kSum) {
          store(a, load<uint32_t>(a) + load<uint32_t>(b));
        } else if (op == CollectiveOp::kProd) {
          store(a, load<uint32_t>(a) * load<uint32_t>(b));
        } else {
          store(a, combine(load<int32_t>(a), load<int32_t>(b), op));
        }
        break;
      case ScalarType::kInt64:
        if (op == CollectiveOp::kSum) {
          store(a, load<uint64_t>(a) + load<uint64_t>(b));
        } else if (op == CollectiveOp::kProd) {
          store(a, load<uint64_t>(a) * load<uint64_t>(b));
        } else {
          store(a, combine(load<int64_t>(a), load<int64_t>(b), op));
        }
        break;
      case ScalarType::kUInt8:
        store(a, static_cast<uint8_t>(combine<unsigned>(load<uint8_t>(a), load<uint8_t>(b), op)));
        break;
      case ScalarType::kUInt64:
        store(a, combine(load<uint64_t>(a), load<uint64_t>(b), op));
        break;
      case ScalarType::kInt8:
        if (op == CollectiveOp::kSum || op == CollectiveOp::kProd) {
          store(a, static_cast<uint8_t>(combine<unsigned>(load<uint8_t>(a), load<uint8_t>(b), op)));
        } else {
          store(a, combine(load<int8_t>(a), load<int8_t>(b), op));
        }
        break;
      case ScalarType::kInt16:
        if (op == CollectiveOp::kSum || op == CollectiveOp::kProd) {
          store(a,
                static_cast<uint16_t>(combine<unsigned>(load<uint16_t>(a), load<uint16_t>(b), op)));
        } else {
          store(a, combine(load<int16_t>(a), load<int16_t>(b), op));
        }
        break;
    }
  }
}

// Reduction of make_values(type, count, r, exact) over ranks 0..size-1 in rank order.
inline std::vector<char> naive_allreduce(ScalarType type, CollectiveOp op, size_t count, int size,
                                         bool exact) {
  std::vector<char> acc = make_values(type, count, 0, exact);
  for (int r = 1; r < size; ++r) naive_reduce(&acc, make_values(type, count, r, exact), type, op);
  return acc;
}

}  // namespace testing
}  // namespace arcreduce
