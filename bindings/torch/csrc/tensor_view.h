// Zero-copy views of torch tensors for the arcreduce runtime. Each check raises the Python
// exception a user expects (pybind11 translates the C++ types below), naming the tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "arcreduce/types.h"

namespace arcreduce_torch {

// Which collective a tensor is checked for: allreduce takes floating-point dtypes only.
enum class Use { kAllreduce, kBroadcast };

// The runtime's view of `tensor`'s memory (data pointer, dtype, shape, device); no copy.
// Throws pybind11::type_error for a dtype or layout the collective cannot take and
// pybind11::value_error for a tensor it cannot use in place (non-contiguous, undefined, on a
// device this build cannot reach, with a lazy negation or conjugation bit).
arcreduce::Tensor view_of(const at::Tensor& tensor, const std::string& name, Use use);

}  // namespace arcreduce_torch
