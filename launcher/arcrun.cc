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
// With --restarts N > 0 it runs mpirun as a child instead and launches the job again after a
// failure, up to N times (elastic.h): before each launch it runs the host discovery script if
// there is one, and every launch gets the same ARCRUN_ELASTIC_DIR and its own ARCRUN_RESTART.
// SIGINT, SIGTERM and SIGHUP to arcrun are forwarded to mpirun (which runs in a session of its
// own, so that it gets each once) and end the restarts. arcrun ends as the last launch ended (its
// exit code, or the signal that ended it).
//
// Exit codes of arcrun itself: 0 after --dry-run or --help, 2 for bad input, 127 when mpirun
// cannot be found or started; otherwise mpirun's.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "launcher/cli.h"
#include "launcher/command.h"
#include "launcher/elastic.h"
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

std::vector<std::string> with_variables(
    std::vector<std::string> environment,
    const std::vector<std::pair<std::string, std::string>>& set) {
  for (const auto& [name, value] : set) {
    const std::string prefix = name + "=";
    environment.erase(
        std::remove_if(environment.begin(), environment.end(),
                       [&prefix](const std::string& entry) { return entry.rfind(prefix, 0) == 0; }),
        environment.end());
    environment.push_back(prefix + value);
  }
  return environment;
}

std::string path_variable() {
  const char* path = std::getenv("PATH");
  return path ? path : "/usr/bin:/bin";
}

// The options of launch number `restart`: on the hosts the discovery script lists now, if any.
LaunchOptions launch_options(const LaunchOptions& options, int restart) {
  LaunchOptions launch = options;
  launch.restart = restart;
  if (!options.discovery_script.empty()) {
    launch = place_on_hosts(
        launch, discover_hosts(options.discovery_script, path_variable(), kDiscoveryTimeoutMs));
  }
  return launch;
}

// Ends arcrun as the job ended: with its exit code, or killed by the same signal.
int end_like(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    std::fflush(nullptr);
    signal(sig, SIG_DFL);
    raise(sig);
    return 128 + sig;
  }
  return WEXITSTATUS(wait_status);
}

// The launches of a job that may be restarted. `created_dir`: ARCRUN_ELASTIC_DIR when arcrun
// made it (removed after a success; kept, and named, when it holds commits after a failure).
int run_with_restarts(const LaunchOptions& options, const LaunchContext& context,
                      const std::string& created_dir) {
  install_stop_handlers();
  std::vector<int> statuses;
  auto last_failure = [&](const std::string& message) {
    std::string line = "arcrun: " + message;
    if (!created_dir.empty() && rmdir(created_dir.c_str()) != 0 && errno != ENOENT) {
      line += "; the job's commits stay in " + created_dir + " (--elastic-dir " + created_dir +
              " resumes from them)";
    }
    std::fprintf(stderr, "%s\n", line.c_str());
    return statuses.empty() ? 1 : end_like(statuses.back());
  };
  for (int restart = 0;; ++restart) {
    LaunchOptions launch;
    try {
      launch = launch_options(options, restart);
    } catch (const UsageError& e) {
      if (stop_signal() != 0) break;
      if (restart == 0) throw;
      return last_failure(std::string(e.what()) + "; not restarting the job, which ended with " +
                          describe_status(statuses.back()));
    }
    if (stop_signal() != 0) break;
    const Command command = build_command(launch, context);
    if (restart == 0 && !created_dir.empty() && !launch.hosts.empty()) {
      std::fprintf(stderr,
                   "arcrun: %s is %s, a directory of this machine: with several hosts, name one "
                   "that every host sees with --elastic-dir\n",
                   kElasticDirVariable, created_dir.c_str());
    }
    if (restart > 0)
      std::fprintf(stderr, "arcrun: %s\n", restart_message(statuses.back(), launch).c_str());
    if (options.verbose) std::fprintf(stderr, "%s\n", format_command(command).c_str());
    std::fflush(nullptr);
    // mpirun in a session of its own: a signal to arcrun's process group (or the terminal's)
    // would reach it beside the one arcrun forwards, and Open MPI takes a second SIGINT or
    // SIGTERM as "stop at once", leaving ranks behind.
    const pid_t pid = start_process(command.argv, with_variables(context.environment, command.env),
                                    -1, /*own_session=*/true, "cannot run " + command.argv[0], 127);
    const int status = wait_process(pid);
    statuses.push_back(status);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      if (!created_dir.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(created_dir, ignored);
      }
      return 0;
    }
    if (stop_signal() != 0) break;
    if (restart == options.restarts) {
      return last_failure(give_up_message(statuses, options.restarts));
    }
  }
  // Stopped by a signal: no launch after it; end as the last launch ended, or as the signal asks.
  if (!statuses.empty()) {
    return last_failure("stopped by signal " + std::to_string(stop_signal()) +
                        ": not restarting the job, which ended with " +
                        describe_status(statuses.back()));
  }
  std::fflush(nullptr);
  signal(stop_signal(), SIG_DFL);
  raise(stop_signal());
  return 128 + stop_signal();
}

int run(int argc, char** argv) {
  const CommandLine line = parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
  if (!line.help.empty()) {
    std::fputs(line.help.c_str(), stdout);
    return 0;
  }
  LaunchOptions options = line.options;
  const LaunchContext context = gather_context(options);
  if (!options.elastic_dir.empty()) {
    options.elastic_dir =
        std::filesystem::absolute(options.elastic_dir).lexically_normal().string();
  }
  std::string created_dir;
  if (needs_elastic_dir(options, context.environment)) {
    // --dry-run creates nothing: its command shows the template of the name.
    created_dir = options.dry_run ? elastic_dir_template() : make_elastic_dir();
    options.elastic_dir = created_dir;
  }
  if (options.dry_run) {
    std::printf("%s\n", format_command(build_command(launch_options(options, 0), context)).c_str());
    return 0;
  }
  if (options.restarts > 0) {
    try {
      return run_with_restarts(options, context, created_dir);
    } catch (...) {
      if (!created_dir.empty()) rmdir(created_dir.c_str());  // only while it is empty
      throw;
    }
  }

  const Command command = build_command(launch_options(options, 0), context);
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
