// MPI datatypes and MPI_Ops that make MPI_Allreduce compute exactly what reduce_into computes:
// builtin ops where MPI's semantics match (float sums, integer min/max, bit ops on the same-sized
// unsigned type, signed sums on unsigned types so they wrap), user-defined commutative ops that
// call reduce_into elsewhere (fp16/bf16 sum/min/max: adds in fp32 and rounds once; float min/max:
// NaN-propagating; uint8 sum, because Open MPI 4.1's AVX MPI_SUM on MPI_UINT8_T saturates at 255
// instead of wrapping; int8 and int16 sums and every integer product, so they wrap as reduce_into
// does whatever the library's vector kernels do).
#pragma once

#include "ops/mpi_include.h"

#include "ops/communicator.h"

namespace arcreduce {

struct MpiReduction {
  MPI_Datatype datatype = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
};

// Owns the user-defined MPI_Ops: created in the constructor (MPI must be initialised; throws
// arcreduce::Error on failure), freed in the noexcept destructor (skipped with a log line when MPI
// is already finalised). lookup() is const and thread-safe.
class MpiReduceOps {
 public:
  MpiReduceOps();
  ~MpiReduceOps();
  MpiReduceOps(const MpiReduceOps&) = delete;
  MpiReduceOps& operator=(const MpiReduceOps&) = delete;

  MpiReduction lookup(ScalarType type, CollectiveOp op) const;

 private:
  void release() noexcept;

  // [float32, float64, float16, bfloat16] x [sum, min, max, prod]; MPI_OP_NULL where a builtin
  // is used.
  MPI_Op custom_[4][4];
  // Integers by width [1, 2, 4, 8 bytes] x [sum, prod], on the unsigned type of that width (the
  // wrapped bits are the same for signed values); MPI_OP_NULL where MPI_SUM is used.
  MPI_Op integer_[4][2];
};

}  // namespace arcreduce
