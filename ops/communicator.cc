#include "ops/communicator.h"

#include <string>

#include "arcreduce/status.h"

namespace arcreduce {

size_t scalar_size(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat32:
    case ScalarType::kInt32:
      return 4;
    case ScalarType::kFloat64:
    case ScalarType::kInt64:
    case ScalarType::kUInt64:
      return 8;
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      return 2;
    case ScalarType::kUInt8:
    case ScalarType::kInt8:
      return 1;
    case ScalarType::kInt16:
      return 2;
  }
  return 0;
}

const char* scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat32:
      return "float32";
    case ScalarType::kFloat64:
      return "float64";
    case ScalarType::kFloat16:
      return "float16";
    case ScalarType::kBFloat16:
      return "bfloat16";
    case ScalarType::kInt32:
      return "int32";
    case ScalarType::kInt64:
      return "int64";
    case ScalarType::kUInt8:
      return "uint8";
    case ScalarType::kUInt64:
      return "uint64";
    case ScalarType::kInt8:
      return "int8";
    case ScalarType::kInt16:
      return "int16";
  }
  return "unknown";
}

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kSum:
      return "sum";
    case CollectiveOp::kMin:
      return "min";
    case CollectiveOp::kMax:
      return "max";
    case CollectiveOp::kBitAnd:
      return "bitand";
    case CollectiveOp::kBitOr:
      return "bitor";
    case CollectiveOp::kProd:
      return "prod";
  }
  return "unknown";
}

void require_buffer(const void* buf, size_t bytes, const char* what) {
  if (buf == nullptr && bytes > 0) {
    throw Error(std::string(what) + ": null buffer for " + std::to_string(bytes) + " bytes");
  }
}

void Communicator::reduce_within_host(float* buf, size_t count) {
  (void)buf;
  (void)count;
  throw Error("reduce_within_host: this communicator does not exchange by host");
}

}  // namespace arcreduce
