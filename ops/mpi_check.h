// ARC_MPI_CHECK(call): runs an MPI call and throws arcreduce::Error(kInternal) when it does not
// return MPI_SUCCESS. The message carries the call text, file:line, the MPI error class/code and
// MPI_Error_string, e.g.
//   "MPI_Isend(...) failed at ops/ring_allreduce.cc:88: MPI_ERR_RANK: invalid rank (code 6)".
// Only meaningful on communicators with MPI_ERRORS_RETURN (MpiCommunicator sets it on its dups);
// with the default MPI_ERRORS_ARE_FATAL the MPI library aborts before the check runs.
#pragma once

#include "ops/mpi_include.h"

#include <string>

namespace arcreduce {
namespace detail {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);
// MPI_Error_string of `code`, or "unknown MPI error <code>".
std::string mpi_error_string(int code);

}  // namespace detail
}  // namespace arcreduce

#define ARC_MPI_CHECK(call)                                                         \
  do {                                                                              \
    const int arc_mpi_rc_ = (call);                                                 \
    if (arc_mpi_rc_ != MPI_SUCCESS) {                                               \
      ::arcreduce::detail::throw_mpi_error(arc_mpi_rc_, #call, __FILE__, __LINE__); \
    }                                                                               \
  } while (0)
