// Which mpirun arcrun drives: Open MPI's, or MPICH's Hydra (MPICH, Intel MPI, MVAPICH).
#pragma once

#include <optional>
#include <string>

#include "launcher/launch_options.h"

namespace arcreduce::launcher {

// The flavour named by `mpirun --version` output; nullopt when it names neither.
std::optional<MpiFlavor> flavor_from_version(const std::string& text);

// "openmpi" or "mpich" (--mpi-flavor); throws UsageError otherwise.
MpiFlavor flavor_from_name(const std::string& name);

// Where execvp would find `program`: a name containing '/' is used as is, any other is looked up
// in the colon-separated `path` (PATH). Returns "" when no executable file is found.
std::string find_executable(const std::string& program, const std::string& path);

// Runs `mpirun_path --version` (argv, no shell) and returns what it printed on stdout and
// stderr; throws UsageError (exit code 127) when it cannot be run.
std::string read_version(const std::string& mpirun_path);

}  // namespace arcreduce::launcher
