// Element-wise CPU kernels behind every reduction: the ring allreduce, the fp16/bf16 MPI_Ops and
// the loopback transport all call these, so a given (type, op) reduces identically everywhere.
// Buffers are raw arrays of `count` elements of `type`; input and output buffers must not
// overlap. All functions are thread-safe (no shared state).
#pragma once

#include <cstddef>

#include "ops/communicator.h"

namespace arcreduce {

// dst[i] = dst[i] op src[i]. See CollectiveOp for the semantics per type: fp16/bf16 are widened
// to fp32, combined and rounded once (nearest-even); integer sums wrap; float min/max propagate
// NaN; bit ops act on the bit patterns.
void reduce_into(void* dst, const void* src, size_t count, ScalarType type, CollectiveOp op);

// buf[i] *= factor for floating types (fp16/bf16: widened to fp32, multiplied by the fp32-rounded
// factor, rounded once; fp64: in double). Throws arcreduce::Error for integer types.
void scale(void* buf, size_t count, ScalarType type, double factor);
// dst[i] = src[i] * factor, the same value scale() gives, in one pass (buffers must not overlap):
// the host's unpacking of an averaged bucket. (copy_batch.h's run_copy_batch_on_host computes
// the same values as the device kernel's reference, with a type switch per element: twice the
// time on 8 MB.) Throws arcreduce::Error for integer types, before writing anything.
void scale_copy(void* dst, const void* src, size_t count, ScalarType type, double factor);

// Converts `count` fp32 values to fp16/bf16 (nearest-even) and back (exact). `type` must be
// kFloat16 or kBFloat16, else arcreduce::Error.
void float_to_half(const float* src, void* dst, size_t count, ScalarType type);
void half_to_float(const void* src, float* dst, size_t count, ScalarType type);

}  // namespace arcreduce
