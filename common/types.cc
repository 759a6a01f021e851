#include "arcreduce/types.h"
#include "arcreduce/status.h"

namespace arcreduce {

int64_t num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  bool zero = false, overflow = false;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    zero = zero || d == 0;  // a zero dimension makes the product 0, overflow or not
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  if (zero) return 0;
  return overflow ? -1 : n;
}

int64_t num_bytes(const std::vector<int64_t>& shape, DType dtype) {
  const int64_t n = num_elements(shape);
  int64_t bytes = 0;
  if (n < 0 || __builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &bytes)) {
    return -1;
  }
  return bytes;
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kBool:
      return 1;
    case DType::kInt16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "unknown-dtype";
}

bool is_floating_point(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProduct:
      return "product";
  }
  return "unknown-op";
}

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kMismatch:
      return "mismatch";
    case StatusCode::kDuplicateName:
      return "duplicate name";
    case StatusCode::kShutdown:
      return "shut down";
    case StatusCode::kStalled:
      return "stalled";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

}  // namespace arcreduce
