#include "ops/reduce_kernels.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "arcreduce/status.h"
#include "ops/half.h"

namespace arcreduce {
namespace {

// Loops take restrict-qualified pointers (the contract forbids overlap) so they vectorise.

template <typename T>
void sum_loop(T* __restrict dst, const T* __restrict src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] += src[i];
}

template <typename T>
void min_loop(T* __restrict dst, const T* __restrict src, size_t count) {
  // `src != src` is true only for NaN, so a NaN on either side survives.
  for (size_t i = 0; i < count; ++i)
    dst[i] = (src[i] < dst[i] || src[i] != src[i]) ? src[i] : dst[i];
}

template <typename T>
void max_loop(T* __restrict dst, const T* __restrict src, size_t count) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = (src[i] > dst[i] || src[i] != src[i]) ? src[i] : dst[i];
}

// Products of narrow unsigned types are formed in W (unsigned, at least as wide as int) so that
// integer promotion cannot turn them into a signed overflow; the low bits are the wrapped result.
template <typename T, typename W>
void prod_loop(T* __restrict dst, const T* __restrict src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = static_cast<T>(W(dst[i]) * W(src[i]));
}

template <typename T>
void and_loop(T* __restrict dst, const T* __restrict src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] &= src[i];
}

template <typename T>
void or_loop(T* __restrict dst, const T* __restrict src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] |= src[i];
}

// Arithmetic on type T, bit ops on the same-sized unsigned type U. Signed sums go through U so
// that overflow wraps instead of being undefined.
template <typename T, typename U>
void reduce_typed(void* dst, const void* src, size_t count, CollectiveOp op, bool wrap_sum) {
  // Floats multiply as themselves; integers as U widened to at least unsigned int.
  using Wide = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  switch (op) {
    case CollectiveOp::kSum:
      if (wrap_sum) {
        sum_loop(static_cast<U*>(dst), static_cast<const U*>(src), count);
      } else {
        sum_loop(static_cast<T*>(dst), static_cast<const T*>(src), count);
      }
      return;
    case CollectiveOp::kMin:
      return min_loop(static_cast<T*>(dst), static_cast<const T*>(src), count);
    case CollectiveOp::kMax:
      return max_loop(static_cast<T*>(dst), static_cast<const T*>(src), count);
    case CollectiveOp::kBitAnd:
      return and_loop(static_cast<U*>(dst), static_cast<const U*>(src), count);
    case CollectiveOp::kBitOr:
      return or_loop(static_cast<U*>(dst), static_cast<const U*>(src), count);
    case CollectiveOp::kProd:
      if (wrap_sum) {
        prod_loop<U, Wide>(static_cast<U*>(dst), static_cast<const U*>(src), count);
      } else if constexpr (std::is_floating_point_v<T>) {
        prod_loop<T, T>(static_cast<T*>(dst), static_cast<const T*>(src), count);
      } else {
        prod_loop<T, Wide>(static_cast<T*>(dst), static_cast<const T*>(src), count);
      }
      return;
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void reduce_half(uint16_t* __restrict dst, const uint16_t* __restrict src, size_t count,
                 CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kSum:
      for (size_t i = 0; i < count; ++i) dst[i] = FromFloat(ToFloat(dst[i]) + ToFloat(src[i]));
      return;
    case CollectiveOp::kMin:
      for (size_t i = 0; i < count; ++i) {
        const float a = ToFloat(dst[i]), b = ToFloat(src[i]);
        if (b < a || b != b) dst[i] = src[i];
      }
      return;
    case CollectiveOp::kMax:
      for (size_t i = 0; i < count; ++i) {
        const float a = ToFloat(dst[i]), b = ToFloat(src[i]);
        if (b > a || b != b) dst[i] = src[i];
      }
      return;
    case CollectiveOp::kBitAnd:
      return and_loop(dst, src, count);
    case CollectiveOp::kBitOr:
      return or_loop(dst, src, count);
    case CollectiveOp::kProd:
      for (size_t i = 0; i < count; ++i) dst[i] = FromFloat(ToFloat(dst[i]) * ToFloat(src[i]));
      return;
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scale_half(uint16_t* buf, size_t count, float factor) {
  for (size_t i = 0; i < count; ++i) buf[i] = FromFloat(ToFloat(buf[i]) * factor);
}

void require_half(ScalarType type, const char* what) {
  if (type != ScalarType::kFloat16 && type != ScalarType::kBFloat16) {
    throw Error(std::string(what) + ": expected float16 or bfloat16, got " +
                scalar_type_name(type));
  }
}

}  // namespace

void reduce_into(void* dst, const void* src, size_t count, ScalarType type, CollectiveOp op) {
  if (count == 0) return;
  switch (type) {
    case ScalarType::kFloat32:
      return reduce_typed<float, uint32_t>(dst, src, count, op, false);
    case ScalarType::kFloat64:
      return reduce_typed<double, uint64_t>(dst, src, count, op, false);
    case ScalarType::kInt32:
      return reduce_typed<int32_t, uint32_t>(dst, src, count, op, true);
    case ScalarType::kInt64:
      return reduce_typed<int64_t, uint64_t>(dst, src, count, op, true);
    case ScalarType::kUInt8:
      return reduce_typed<uint8_t, uint8_t>(dst, src, count, op, false);
    case ScalarType::kInt8:
      return reduce_typed<int8_t, uint8_t>(dst, src, count, op, true);
    case ScalarType::kInt16:
      return reduce_typed<int16_t, uint16_t>(dst, src, count, op, true);
    case ScalarType::kUInt64:
      return reduce_typed<uint64_t, uint64_t>(dst, src, count, op, false);
    case ScalarType::kFloat16:
      return reduce_half<fp16_to_float, float_to_fp16>(
          static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count, op);
    case ScalarType::kBFloat16:
      return reduce_half<bf16_to_float, float_to_bf16>(
          static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count, op);
  }
  throw Error("reduce_into: unknown scalar type", StatusCode::kInternal);
}

void scale(void* buf, size_t count, ScalarType type, double factor) {
  switch (type) {
    case ScalarType::kFloat32: {
      float* p = static_cast<float*>(buf);
      const float f = static_cast<float>(factor);
      for (size_t i = 0; i < count; ++i) p[i] *= f;
      return;
    }
    case ScalarType::kFloat64: {
      double* p = static_cast<double*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] *= factor;
      return;
    }
    case ScalarType::kFloat16:
      return scale_half<fp16_to_float, float_to_fp16>(static_cast<uint16_t*>(buf), count,
                                                      static_cast<float>(factor));
    case ScalarType::kBFloat16:
      return scale_half<bf16_to_float, float_to_bf16>(static_cast<uint16_t*>(buf), count,
                                                      static_cast<float>(factor));
    default:
      throw Error(std::string("scale: floating type required, got ") + scalar_type_name(type));
  }
}

void scale_copy(void* dst, const void* src, size_t count, ScalarType type, double factor) {
  switch (type) {
    case ScalarType::kFloat32: {
      float* out = static_cast<float*>(dst);
      const float* in = static_cast<const float*>(src);
      const float f = static_cast<float>(factor);
      for (size_t i = 0; i < count; ++i) out[i] = in[i] * f;
      return;
    }
    case ScalarType::kFloat64: {
      double* out = static_cast<double*>(dst);
      const double* in = static_cast<const double*>(src);
      for (size_t i = 0; i < count; ++i) out[i] = in[i] * factor;
      return;
    }
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      if (count > 0) std::memcpy(dst, src, count * scalar_size(type));
      return scale(dst, count, type, factor);
    default:  // rejected before anything is written
      throw Error(std::string("scale_copy: floating type required, got ") + scalar_type_name(type));
  }
}

void float_to_half(const float* src, void* dst, size_t count, ScalarType type) {
  require_half(type, "float_to_half");
  uint16_t* out = static_cast<uint16_t*>(dst);
  if (type == ScalarType::kFloat16) {
    for (size_t i = 0; i < count; ++i) out[i] = float_to_fp16(src[i]);
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = float_to_bf16(src[i]);
  }
}

void half_to_float(const void* src, float* dst, size_t count, ScalarType type) {
  require_half(type, "half_to_float");
  const uint16_t* in = static_cast<const uint16_t*>(src);
  if (type == ScalarType::kFloat16) {
    for (size_t i = 0; i < count; ++i) dst[i] = fp16_to_float(in[i]);
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_float(in[i]);
  }
}

}  // namespace arcreduce
