// ARCREDUCE_CHECK_CONSISTENCY: every rank must have selected the same rows/indices for every
// tensor of a bucket. Two small All-Reduces (min and max of per-tensor hashes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/communicator.h"

namespace arcreduce {

// Throws Error(kInternal) naming the first tensor whose hashes differ across ranks.
void check_same_selection(Communicator& comm, const std::vector<std::string>& names,
                          const std::vector<uint64_t>& hashes);

}  // namespace arcreduce
