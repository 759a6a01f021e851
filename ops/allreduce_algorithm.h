// Which algorithm MpiCommunicator::allreduce uses (config: ARCREDUCE_ALLREDUCE_ALGORITHM).
#pragma once

#include <cstddef>
#include <string>

namespace arcreduce {

enum class AllreduceAlgorithm {
  // Ring when the job spans several hosts and the message is at least the ring threshold
  // (default 1 MiB), else MPI_Allreduce. See docs/communicators.md for the measurements.
  kAuto,
  // Our bandwidth-optimal segmented ring (reduce-scatter + all-gather) over MPI_Isend/Irecv.
  kRing,
  // MPI_Allreduce(MPI_IN_PLACE), i.e. whatever the MPI library picks.
  kMpi,
};

// "auto", "ring", "mpi".
const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);

// Parses "auto" | "ring" | "mpi" (case-insensitive, surrounding blanks ignored). Throws
// arcreduce::Error(kInvalidArgument) naming `variable`, the value and the accepted values.
AllreduceAlgorithm parse_allreduce_algorithm(
    const std::string& value, const std::string& variable = "ARCREDUCE_ALLREDUCE_ALGORITHM");

// The decision kAuto makes, exposed so it can be tested and logged. kRing and kMpi return
// themselves.
AllreduceAlgorithm resolve_allreduce_algorithm(AllreduceAlgorithm algorithm, size_t bytes, int size,
                                               int local_size, size_t ring_threshold_bytes);

}  // namespace arcreduce
