// arcrun: starts an arcreduce job through mpirun (docs/launcher.md).
//
//   arcrun -np N [-H host:slots,... | --hostfile FILE] [options] [--] program [args...]
//
// It parses and checks the command line (cli.h), finds mpirun and tells Open MPI from MPICH
// (mpi_flavor.h), builds one mpirun argv (command.h) and replaces itself with it: execv, no
// shell, so every argument reaches mpirun literally. Because arcrun *becomes* mpirun, SIGINT and
// SIGTERM sent to arcrun's pid or its terminal's process group go to mpirun itself, which
// forwards them to the ranks, and the job's exit status is arcrun's exit status.
//
// Exit codes of arcrun itself: 0 after --dry-run or --help, 2 for bad input, 127 when mpirun
// cannot be found or started; otherwise mpirun's.
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "launcher/cli.h"
#include "launcher/command.h"
#include "launcher/mpi_flavor.h"

extern char** environ;

namespace arcreduce::launcher {
namespace {

// CPUs this process may run on (the affinity mask honours container cpusets), else all online.
int local_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

LaunchContext gather_context(const LaunchOptions& options) {
  LaunchContext context;
  context.as_root = geteuid() == 0;
  context.local_cpus = local_cpus();
  for (char** entry = environ; *entry != nullptr; ++entry) context.environment.push_back(*entry);
  const char* path = std::getenv("PATH");
  context.mpirun_path = find_executable(options.mpirun, path ? path : "/usr/bin:/bin");
  if (context.mpirun_path.empty()) {
    throw UsageError("mpirun not found: '" + options.mpirun +
                         "' is not an executable (give one with --mpirun PATH)",
                     127);
  }
  // Detection runs in --dry-run too, so that the printed command is the one that would run.
  if (options.flavor) {
    context.flavor = *options.flavor;
  } else {
    const auto flavor = flavor_from_version(read_version(context.mpirun_path));
    if (!flavor) {
      throw UsageError("cannot tell whether " + context.mpirun_path +
                       " is Open MPI or MPICH from its --version; give --mpi-flavor");
    }
    context.flavor = *flavor;
  }
  return context;
}

int run(int argc, char** argv) {
  const CommandLine line = parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
  if (!line.help.empty()) {
    std::fputs(line.help.c_str(), stdout);
    return 0;
  }
  const LaunchOptions& options = line.options;
  const Command command = build_command(options, gather_context(options));
  if (options.dry_run) {
    std::printf("%s\n", format_command(command).c_str());
    return 0;
  }
  if (options.verbose) std::fprintf(stderr, "%s\n", format_command(command).c_str());
  std::fflush(nullptr);

  for (const auto& [name, value] : command.env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> exec_argv;
  for (const std::string& word : command.argv) exec_argv.push_back(const_cast<char*>(word.c_str()));
  exec_argv.push_back(nullptr);
  execv(exec_argv[0], exec_argv.data());
  throw UsageError("cannot run " + command.argv[0] + ": " + std::strerror(errno), 127);
}

}  // namespace
}  // namespace arcreduce::launcher

int main(int argc, char** argv) {
  try {
    return arcreduce::launcher::run(argc, argv);
  } catch (const arcreduce::launcher::UsageError& e) {
    std::fprintf(stderr, "arcrun: %s\n", e.what());
    return e.exit_code();
  }
}
