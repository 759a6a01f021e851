// How a tensor's DType is reduced: the communicator's scalar type, and whether averaging scales
// before the sum (half precision, so the sum stays in range) or after it (fp32/fp64). Shared by
// the host and the CUDA bucket paths so both reduce a dtype the same way.
#pragma once

#include <arcreduce/types.h>

#include "ops/communicator.h"

namespace arcreduce {

// Integer dtypes are only broadcast, never reduced: they map to kFloat32 here and never reach a
// reduction (Runtime::check_allreduce refuses them).
inline ScalarType reduce_scalar_type(DType dtype) {
  switch (dtype) {
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

inline bool scales_before_sum(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

}  // namespace arcreduce
