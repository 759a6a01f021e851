#include "ops/mpi_reduce_ops.h"

#include <spdlog/spdlog.h>

#include "arcreduce/status.h"
#include "ops/mpi_check.h"
#include "ops/reduce_kernels.h"

namespace arcreduce {
namespace {

constexpr ScalarType kFloatTypes[4] = {ScalarType::kFloat32, ScalarType::kFloat64,
                                       ScalarType::kFloat16, ScalarType::kBFloat16};
constexpr CollectiveOp kArithmeticOps[3] = {CollectiveOp::kSum, CollectiveOp::kMin,
                                            CollectiveOp::kMax};

int float_index(ScalarType type) {
  for (int i = 0; i < 4; ++i) {
    if (kFloatTypes[i] == type) return i;
  }
  return -1;
}

int op_index(CollectiveOp op) {
  for (int i = 0; i < 3; ++i) {
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
  }
  return MPI_OP_NULL;
}

}  // namespace

MpiReduceOps::MpiReduceOps() {
  for (auto& row : custom_) {
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
    ARC_MPI_CHECK(
        MPI_Op_create(&user_reduce<ScalarType::kUInt8, CollectiveOp::kSum>, 1, &uint8_sum_));
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
  free_op(uint8_sum_);
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
  const bool as_unsigned = bitwise || op == CollectiveOp::kSum;
  switch (type) {
    case ScalarType::kFloat32:
      return {MPI_UINT32_T, builtin_op(op)};
    case ScalarType::kFloat64:
      return {MPI_UINT64_T, builtin_op(op)};
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      return {MPI_UINT16_T, builtin_op(op)};
    case ScalarType::kInt32:
      return {as_unsigned ? MPI_UINT32_T : MPI_INT32_T, builtin_op(op)};
    case ScalarType::kInt64:
      return {as_unsigned ? MPI_UINT64_T : MPI_INT64_T, builtin_op(op)};
    case ScalarType::kUInt8:
      return {MPI_UINT8_T, op == CollectiveOp::kSum ? uint8_sum_ : builtin_op(op)};
    case ScalarType::kUInt64:
      return {MPI_UINT64_T, builtin_op(op)};
  }
  throw Error("no MPI mapping for scalar type", StatusCode::kInternal);
}

}  // namespace arcreduce
