// Helpers shared by the runtime's multi-process tests (tests/mpi/runtime_*.cc): owning test
// tensors of every dtype, exactly representable per-rank inputs with their reference results,
// and rank-prefixed reporting. Reference values are computed here, independently of the runtime
// (own fp16/bf16 conversions), so a runtime bug cannot hide in a shared helper.
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "arcreduce/arcreduce.h"

namespace arcreduce_test {

using arcreduce::DType;
using arcreduce::ReduceOp;

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// IEEE binary16, round to nearest even.
inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t fexp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (fexp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int32_t exp = static_cast<int32_t>(fexp) - 127 + 15;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  uint32_t x = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                         : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16_to_float(uint16_t h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline size_t elem_size(DType dt) {
  return (dt == DType::kFloat64) ? 8 : (dt == DType::kFloat32) ? 4 : 2;
}

// Rounds v to the nearest value representable in dt.
inline double quantize(DType dt, double v) {
  switch (dt) {
    case DType::kFloat32:
      return static_cast<float>(v);
    case DType::kFloat64:
      return v;
    case DType::kFloat16:
      return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::kBFloat16:
      return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    default:  // integer dtypes: broadcast only
      break;
  }
  return v;
}

inline double epsilon(DType dt) {
  switch (dt) {
    case DType::kFloat32:
      return std::ldexp(1.0, -23);
    case DType::kFloat64:
      return std::ldexp(1.0, -52);
    case DType::kFloat16:
      return std::ldexp(1.0, -10);
    case DType::kBFloat16:
      return std::ldexp(1.0, -7);
    default:  // integer dtypes: broadcast only
      break;
  }
  return 0;
}

inline const char* short_name(DType dt) {
  switch (dt) {
    case DType::kFloat32:
      return "f32";
    case DType::kFloat64:
      return "f64";
    case DType::kFloat16:
      return "f16";
    case DType::kBFloat16:
      return "bf16";
    default:  // integer dtypes: broadcast only
      break;
  }
  return "?";
}

// Tensor{data, dtype, shape} without -Wmissing-field-initializers noise.
inline arcreduce::Tensor view_of(void* data, DType dtype, std::vector<int64_t> shape) {
  arcreduce::Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

inline int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// An owning tensor. Storage is never empty, so view() has a non-null pointer even for zero
// elements (the null-pointer case is built explicitly where it is tested).
class TestTensor {
 public:
  TestTensor() = default;
  TestTensor(DType dtype, std::vector<int64_t> shape)
      : dtype_(dtype), shape_(std::move(shape)), count_(count_of(shape_)) {
    bytes_.assign(static_cast<size_t>(std::max<int64_t>(count_, 1)) * elem_size(dtype_), 0);
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t count() const { return count_; }
  size_t nbytes() const { return static_cast<size_t>(count_) * elem_size(dtype_); }
  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }

  arcreduce::Tensor view() { return view_of(bytes_.data(), dtype_, shape_); }

  void set(int64_t i, double v) {
    uint8_t* p = bytes_.data() + i * elem_size(dtype_);
    switch (dtype_) {
      case DType::kFloat32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kFloat64:
        std::memcpy(p, &v, 8);
        break;
      case DType::kFloat16: {
        uint16_t h = float_to_half(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        uint16_t h = float_to_bf16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      default:  // integer dtypes: broadcast only
        break;
    }
  }

  double get(int64_t i) const {
    const uint8_t* p = bytes_.data() + i * elem_size(dtype_);
    switch (dtype_) {
      case DType::kFloat32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case DType::kFloat64: {
        double d;
        std::memcpy(&d, p, 8);
        return d;
      }
      case DType::kFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return half_to_float(h);
      }
      case DType::kBFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return bf16_to_float(h);
      }
      default:  // integer dtypes: broadcast only
        break;
    }
    return 0;
  }

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  int64_t count_ = 0;
  std::vector<uint8_t> bytes_;
};

// Input of element i on rank r: a multiple of 0.25 in [-2, 2], so every partial sum over up to
// 8 ranks is exact in every dtype (bf16 included) and sums are compared bit-exactly.
inline double input_value(int rank, int64_t i, int salt) {
  return static_cast<double>((i * 7 + rank * 13 + salt * 5) % 17 - 8) * 0.25;
}

inline void fill_inputs(TestTensor& t, int rank, int salt) {
  for (int64_t i = 0; i < t.count(); ++i) t.set(i, input_value(rank, i, salt));
}

// Checks t against the reduction over `size` ranks of fill_inputs(.., salt). Sums are exact;
// averages may differ from the exact quotient by a few ulps of the inputs (pre-scaling or
// rounding of the division). Returns "" when correct, else a description of the first errors.
inline std::string check_reduced(const TestTensor& t, ReduceOp op, int size, int salt) {
  const double tol = op == ReduceOp::kSum ? 0.0 : 8.0 * epsilon(t.dtype()) * 2.0 /* max |input| */;
  std::string errors;
  int64_t bad = 0;
  for (int64_t i = 0; i < t.count(); ++i) {
    double sum = 0;
    for (int r = 0; r < size; ++r) sum += input_value(r, i, salt);
    const double want = op == ReduceOp::kSum ? sum : sum / size;
    const double got = t.get(i);
    if (!(std::fabs(got - want) <= tol)) {
      if (++bad <= 5) {
        errors += "element " + std::to_string(i) + ": got " + std::to_string(got) + ", want " +
                  std::to_string(want) + " (tol " + std::to_string(tol) + "); ";
      }
    }
  }
  if (bad) errors += std::to_string(bad) + " of " + std::to_string(t.count()) + " wrong";
  return errors;
}

// True when t's bytes equal rank 0's (collective over MPI_COMM_WORLD: every rank must call it
// with a tensor of the same byte size). Compares 64-bit FNV-1a digests of the bytes, so that the
// test thread never receives a large message of its own while the runtime's coordinator thread
// drives MPI's progress (tests/sanitizers/tsan.supp says why that matters under ThreadSanitizer).
inline bool same_on_all_ranks(const TestTensor& t) {
  uint64_t digest = 1469598103934665603ull;
  const uint8_t* bytes = t.data();
  for (size_t i = 0; i < t.nbytes(); ++i) digest = (digest ^ bytes[i]) * 1099511628211ull;
  uint64_t root = digest;
  MPI_Bcast(&root, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  int same = root == digest;
  int all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

// Dense, no error feedback: these tests check the runtime, not the compressors.
inline arcreduce::AllreduceOptions dense(ReduceOp op = ReduceOp::kAverage) {
  arcreduce::AllreduceOptions o;
  o.op = op;
  o.compression.compressor = "none";
  o.compression.error_feedback = "none";
  return o;
}

inline std::string code_name(arcreduce::StatusCode c) {
  return arcreduce::status_code_name(c);
}

inline std::string describe(const arcreduce::Status& s) {
  return code_name(s.code()) + ": " + s.message();
}

}  // namespace arcreduce_test
