#include "ops/mpi_check.h"

#include "arcreduce/status.h"

namespace arcreduce {
namespace detail {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS || length <= 0) {
    return "unknown MPI error " + std::to_string(code);
  }
  return std::string(text, static_cast<size_t>(length));
}

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  int error_class = code;
  if (MPI_Error_class(code, &error_class) != MPI_SUCCESS) error_class = code;
  std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                        ": " + mpi_error_string(code) + " (code " + std::to_string(code);
  if (error_class != code) message += ", class " + std::to_string(error_class);
  message += ")";
  throw Error(message, StatusCode::kInternal);
}

}  // namespace detail
}  // namespace arcreduce
