#include "launcher/mpi_flavor.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace arcreduce::launcher {

std::optional<MpiFlavor> flavor_from_version(const std::string& text) {
  // Open MPI 4: "mpirun (Open MPI) 4.1.4"; Open MPI 5 (PRRTE): "mpirun (Open MPI) 5.0.0".
  if (text.find("Open MPI") != std::string::npos || text.find("OpenRTE") != std::string::npos) {
    return MpiFlavor::kOpenMpi;
  }
  // MPICH and its derivatives start through Hydra: "HYDRA build details:", "Intel(R) MPI".
  if (text.find("HYDRA") != std::string::npos || text.find("MPICH") != std::string::npos ||
      text.find("Intel(R) MPI") != std::string::npos) {
    return MpiFlavor::kMpich;
  }
  return std::nullopt;
}

MpiFlavor flavor_from_name(const std::string& name) {
  if (name == "openmpi") return MpiFlavor::kOpenMpi;
  if (name == "mpich") return MpiFlavor::kMpich;
  throw UsageError("--mpi-flavor '" + name + "' is invalid: expected openmpi or mpich");
}

std::string find_executable(const std::string& program, const std::string& path) {
  auto executable = [](const std::string& file) {
    struct stat info;
    return stat(file.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
           access(file.c_str(), X_OK) == 0;
  };
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return executable(program) ? program : "";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string file = (dir.empty() ? "." : dir) + "/" + program;
    if (executable(file)) return file;
  }
  return "";
}

std::string read_version(const std::string& mpirun_path) {
  int fds[2];
  if (pipe(fds) != 0) {
    throw UsageError(std::string("cannot run ") + mpirun_path + ": " + std::strerror(errno), 127);
  }
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    throw UsageError(std::string("cannot run ") + mpirun_path + ": " + std::strerror(errno), 127);
  }
  if (child == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    const char* argv[] = {mpirun_path.c_str(), "--version", nullptr};
    execv(argv[0], const_cast<char* const*>(argv));
    _exit(127);
  }
  close(fds[1]);
  std::string output;
  char buffer[4096];
  for (;;) {
    const ssize_t got = read(fds[0], buffer, sizeof(buffer));
    if (got > 0) {
      output.append(buffer, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && output.empty()) {
    throw UsageError("cannot run " + mpirun_path + " --version", 127);
  }
  return output;
}

}  // namespace arcreduce::launcher
