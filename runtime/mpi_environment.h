// What arcreduce sets in the environment of the MPI library it initialises itself, before
// MPI_Init_thread (docs/design/runtime-waiting.md, "Open MPI's TCP eager limit").
#pragma once

#include <cstddef>

#include "ops/allreduce_algorithm.h"

namespace arcreduce {

// Open MPI's TCP transport sends a message above its eager limit (64 KiB by default) only after a
// handshake with the receiver, and on a loaded link that handshake waits behind the bulk data in
// the sender's queue. Raised so that a ring segment across hosts, and the compressed collectives
// of a step, go in one eager message each. The margin covers Open MPI's fragment header.
constexpr size_t kTcpEagerLimitBytes = kMultiHostRingSegmentBytes + 1024;
constexpr const char* kEnvTcpEagerLimit = "OMPI_MCA_btl_tcp_eager_limit";

// Sets kEnvTcpEagerLimit to kTcpEagerLimitBytes unless the variable is already set (a user's
// value, or one that mpirun --mca passed), in a build against Open MPI. Returns whether it set it.
bool apply_mpi_environment_defaults();

}  // namespace arcreduce
