#include "ops/mpi_reduce_ops.h"

#include <spdlog/spdlog.h>

#include "arcreduce/status.h"
#include "ops/mpi_check.h"
#include "ops/reduce_kernels.h"

namespace arcreduce {
namespace {

constexpr ScalarType kFloatTypes[4] = {ScalarType::kFloat32, ScalarType::kFloat64,
                                       ScalarType::kFloat16, ScalarType::kBFloat16};
constexpr CollectiveOp kArithmeticOps[4] = {CollectiveOp::kSum, CollectiveOp::kMin,
                                            CollectiveOp::kMax, CollectiveOp::kProd};

int float_index(ScalarType type) {
  for (int i = 0; i < 4; ++i) {
    if (kFloatTypes[i] == type) return i;
  }
  return -1;
}

int op_index(CollectiveOp op) {
  for (int i = 0; i < 4; ++i) {
    if (kArithmeticOps[i] == op) return i;
  }
  return -1;
}

// MPI calls this with inout = in op inout; the ops are commutative, so reduce_into(inout, in)
// gives the same value. reduce_into cannot throw for these fixed (type, op) pairs.
template <ScalarType kType, CollectiveOp kOp>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(inout, in, static_cast<size_t>(*len), kType, kOp);
}

template <ScalarType kType>
void create_row(MPI_Op* row) {
  ARC_MPI_CHECK(MPI_Op_create(&user_reduce<kType, CollectiveOp::kSum>, 1, &row[0]));
  ARC_MPI_CHECK(MPI_Op_create(&user_reduce<kType, CollectiveOp::kMin>, 1, &row[1]));
  ARC_MPI_CHECK(MPI_Op_create(&user_reduce<kType, CollectiveOp::kMax>, 1, &row[2]));
  ARC_MPI_CHECK(MPI_Op_create(&user_reduce<kType, CollectiveOp::kProd>, 1, &row[3]));
}

// Wrapping integer sum and product of one width; kType's reduce_into wraps (unsigned arithmetic).
template <ScalarType kType>
void create_integer_row(MPI_Op* row, bool sum) {
  if (sum) ARC_MPI_CHECK(MPI_Op_create(&user_reduce<kType, CollectiveOp::kSum>, 1, &row[0]));
  ARC_MPI_CHECK(MPI_Op_create(&user_reduce<kType, CollectiveOp::kProd>, 1, &row[1]));
}

int width_index(size_t bytes) {
  return bytes == 1 ? 0 : bytes == 2 ? 1 : bytes == 4 ? 2 : 3;
}

MPI_Op builtin_op(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kSum:
      return MPI_SUM;
    case CollectiveOp::kMin:
      return MPI_MIN;
    case CollectiveOp::kMax:
      return MPI_MAX;
    case CollectiveOp::kBitAnd:
      return MPI_BAND;
    case CollectiveOp::kBitOr:
      return MPI_BOR;
    case CollectiveOp::kProd:
      return MPI_PROD;
  }
  return MPI_OP_NULL;
}

}  // namespace

MpiReduceOps::MpiReduceOps() {
  for (auto& row : custom_) {
    for (MPI_Op& op : row) op = MPI_OP_NULL;
  }
  for (auto& row : integer_) {
    for (MPI_Op& op : row) op = MPI_OP_NULL;
  }
  try {
    // float32/float64 sums stay on MPI_SUM (vectorised inside the MPI library).
    create_row<ScalarType::kFloat16>(custom_[2]);
    create_row<ScalarType::kBFloat16>(custom_[3]);
    ARC_MPI_CHECK(
        MPI_Op_create(&user_reduce<ScalarType::kFloat32, CollectiveOp::kMin>, 1, &custom_[0][1]));
    ARC_MPI_CHECK(
        MPI_Op_create(&user_reduce<ScalarType::kFloat32, CollectiveOp::kMax>, 1, &custom_[0][2]));
    ARC_MPI_CHECK(
        MPI_Op_create(&user_reduce<ScalarType::kFloat64, CollectiveOp::kMin>, 1, &custom_[1][1]));
    ARC_MPI_CHECK(
        MPI_Op_create(&user_reduce<ScalarType::kFloat64, CollectiveOp::kMax>, 1, &custom_[1][2]));
    create_integer_row<ScalarType::kUInt8>(integer_[0], true);
    create_integer_row<ScalarType::kInt16>(integer_[1], true);
    create_integer_row<ScalarType::kInt32>(integer_[2], false);
    create_integer_row<ScalarType::kInt64>(integer_[3], false);
  } catch (...) {
    release();
    throw;
  }
}

MpiReduceOps::~MpiReduceOps() {
  release();
}

void MpiReduceOps::release() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  const auto free_op = [finalized](MPI_Op& op) {
    if (op == MPI_OP_NULL) return;
    if (finalized) {
      spdlog::warn("arcreduce: MPI already finalized; user-defined MPI_Op not freed");
    } else if (MPI_Op_free(&op) != MPI_SUCCESS) {
      spdlog::error("arcreduce: MPI_Op_free failed");
    }
    op = MPI_OP_NULL;
  };
  for (auto& row : integer_) {
    for (MPI_Op& op : row) free_op(op);
  }
  for (auto& row : custom_) {
    for (MPI_Op& op : row) free_op(op);
  }
}

MpiReduction MpiReduceOps::lookup(ScalarType type, CollectiveOp op) const {
  const bool bitwise = op == CollectiveOp::kBitAnd || op == CollectiveOp::kBitOr;
  const int fi = float_index(type);
  if (fi >= 0 && !bitwise) {
    const MPI_Op custom = custom_[fi][op_index(op)];
    if (custom != MPI_OP_NULL) {
      return {fi == 0 ? MPI_FLOAT : fi == 1 ? MPI_DOUBLE : MPI_UINT16_T, custom};
    }
    return {fi == 0 ? MPI_FLOAT : MPI_DOUBLE, builtin_op(op)};
  }
  const bool as_unsigned = bitwise || op == CollectiveOp::kSum || op == CollectiveOp::kProd;
  const bool wrapping = op == CollectiveOp::kSum || op == CollectiveOp::kProd;
  // The integer user op of this width, where there is one (else the builtin).
  const auto integer_op = [&](size_t bytes) {
    if (!wrapping) return builtin_op(op);
    const MPI_Op custom = integer_[width_index(bytes)][op == CollectiveOp::kSum ? 0 : 1];
    return custom != MPI_OP_NULL ? custom : builtin_op(op);
  };
  switch (type) {
    case ScalarType::kFloat32:
      return {MPI_UINT32_T, builtin_op(op)};
    case ScalarType::kFloat64:
      return {MPI_UINT64_T, builtin_op(op)};
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      return {MPI_UINT16_T, builtin_op(op)};
    case ScalarType::kInt8:
      return {as_unsigned ? MPI_UINT8_T : MPI_INT8_T, integer_op(1)};
    case ScalarType::kInt16:
      return {as_unsigned ? MPI_UINT16_T : MPI_INT16_T, integer_op(2)};
    case ScalarType::kInt32:
      return {as_unsigned ? MPI_UINT32_T : MPI_INT32_T, integer_op(4)};
    case ScalarType::kInt64:
      return {as_unsigned ? MPI_UINT64_T : MPI_INT64_T, integer_op(8)};
    case ScalarType::kUInt8:
      return {MPI_UINT8_T, integer_op(1)};
    case ScalarType::kUInt64:
      return {MPI_UINT64_T, integer_op(8)};
  }
  throw Error("no MPI mapping for scalar type", StatusCode::kInternal);
}

}  // namespace arcreduce
