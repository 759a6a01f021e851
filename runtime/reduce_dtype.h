// How a tensor's DType is reduced: the communicator's scalar type, and whether averaging scales
// before the sum (half precision, so the sum stays in range) or after it (fp32/fp64). Shared by
// the host and the CUDA bucket paths so both reduce a dtype the same way.
#pragma once

#include <arcreduce/types.h>

#include "ops/communicator.h"

namespace arcreduce {

inline ScalarType reduce_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
    case DType::kBool:  // 0 and 1: min, max and product act as on uint8
      return ScalarType::kUInt8;
    case DType::kInt8:
      return ScalarType::kInt8;
    case DType::kInt16:
      return ScalarType::kInt16;
    case DType::kInt32:
      return ScalarType::kInt32;
    case DType::kInt64:
      return ScalarType::kInt64;
    case DType::kFloat64:
      return ScalarType::kFloat64;
    case DType::kFloat16:
      return ScalarType::kFloat16;
    case DType::kBFloat16:
      return ScalarType::kBFloat16;
    default:
      return ScalarType::kFloat32;
  }
}

// The communicator's operation for a ReduceOp (kAverage sums, then scales).
inline CollectiveOp reduce_collective_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return CollectiveOp::kMin;
    case ReduceOp::kMax:
      return CollectiveOp::kMax;
    case ReduceOp::kProduct:
      return CollectiveOp::kProd;
    default:
      return CollectiveOp::kSum;
  }
}

// Whether (dtype, op) may be compressed: sums and averages of floating-point tensors.
inline bool compressible(DType dtype, ReduceOp op) {
  return is_floating_point(dtype) && (op == ReduceOp::kSum || op == ReduceOp::kAverage);
}

inline bool scales_before_sum(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

}  // namespace arcreduce
