#include "runtime/mpi_environment.h"

#include <cstdlib>
#include <string>

#include "ops/mpi_include.h"

namespace arcreduce {

bool apply_mpi_environment_defaults() {
#ifdef OPEN_MPI
  if (std::getenv(kEnvTcpEagerLimit) != nullptr) return false;
  return setenv(kEnvTcpEagerLimit, std::to_string(kTcpEagerLimitBytes).c_str(), 0) == 0;
#else
  return false;
#endif
}

}  // namespace arcreduce
