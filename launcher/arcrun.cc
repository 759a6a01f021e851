// arcrun: starts an arcreduce job on this machine through Open MPI's mpirun.
//
//   arcrun -np N [--dry-run] [--mpirun PATH] [--] program [args...]
//
// It builds one mpirun command line and replaces itself with it (execvp, no shell): N ranks,
// no CPU binding (the coordinator thread needs a core beside the framework's threads), ranks
// placed by slot, every ARCREDUCE_* variable of the environment forwarded with -x. As root it
// adds --allow-run-as-root and Open MPI's two confirmation variables; with more ranks than CPUs
// it oversubscribes. --dry-run prints the command, with those variables, instead of running it.
//
// This is a placeholder: the full launcher (hosts, arcrun flags for every ARCREDUCE_* knob,
// other MPI implementations) comes later.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

extern char** environ;

namespace {

constexpr const char* kRootVars[] = {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"};

struct Options {
  int ranks = 0;
  bool dry_run = false;
  std::string mpirun = "mpirun";
  std::vector<std::string> program;  // program and its arguments
};

// CPUs this process may run on (its affinity mask honours container cpusets), else all online.
int local_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

std::vector<std::string> arcreduce_variables() {
  std::vector<std::string> names;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string var(*entry);
    if (var.rfind("ARCREDUCE_", 0) == 0) names.push_back(var.substr(0, var.find('=')));
  }
  return names;
}

std::vector<std::string> mpirun_command(const Options& options, bool as_root) {
  std::vector<std::string> argv = {options.mpirun, "-np",  std::to_string(options.ranks),
                                   "--bind-to",    "none", "--map-by",
                                   "slot"};
  if (as_root) argv.push_back("--allow-run-as-root");
  const int cpus = local_cpus();
  if (options.ranks > cpus) {
    // Count hardware threads as slots, so that "more ranks than CPUs" is what decides.
    argv.insert(argv.end(), {"--oversubscribe", "--use-hwthread-cpus"});
  }
  for (const std::string& name : arcreduce_variables()) argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), options.program.begin(), options.program.end());
  return argv;
}

// Single-quotes a word for a POSIX shell when it holds anything but safe characters.
std::string shell_quote(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-./=:,+@%") == std::string::npos;
  if (safe) return word;
  std::string quoted = "'";
  for (char c : word) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Splits the command line into arcrun's own options and the program with its arguments, which
// start after "--" or at the first word that is neither an option nor an option's value.
// mpirun's spelling "-np" is not a CLI11 option name, so it becomes --np here.
void split_args(int argc, char** argv, std::vector<std::string>* own,
                std::vector<std::string>* program) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    if (arg == "-np") arg = "--np";
    own->push_back(arg);
    if ((arg == "-n" || arg == "--np" || arg == "--mpirun") && i + 1 < argc) {
      own->push_back(argv[++i]);  // the option's value, whatever it looks like
    }
  }
  program->assign(argv + i, argv + argc);
}

// Accepts a decimal integer >= 1; the message names the bad value.
std::string check_ranks(const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long ranks = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || ranks < 1 || ranks > 1 << 20) {
    return "number of ranks must be a positive integer, got '" + value + "'";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app("Start an arcreduce job on this machine through mpirun.", "arcrun");
  app.add_option("-n,--np", options.ranks, "number of ranks (also -np)")
      ->required()
      ->check(CLI::Validator(check_ranks, "N", "ranks"));
  app.add_flag("--dry-run", options.dry_run, "print the mpirun command instead of running it");
  app.add_option("--mpirun", options.mpirun, "mpirun executable")->capture_default_str();
  app.footer("Runs: mpirun -np N ... program [args...]; example: arcrun -np 4 -- ./train\n");

  std::vector<std::string> args;
  split_args(argc, argv, &args, &options.program);
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "arcrun: %s (try arcrun --help)\n", e.what());
    return 2;
  }
  if (options.program.empty()) {
    std::fprintf(stderr, "arcrun: no program given (usage: arcrun -np N [--] program [args...])\n");
    return 2;
  }

  const bool as_root = geteuid() == 0;
  const std::vector<std::string> command = mpirun_command(options, as_root);
  if (options.dry_run) {
    std::string line;
    if (as_root) {
      for (const char* var : kRootVars) line += std::string(var) + "=1 ";
    }
    for (const std::string& word : command) line += shell_quote(word) + " ";
    line.pop_back();
    std::printf("%s\n", line.c_str());
    return 0;
  }

  if (as_root) {
    for (const char* var : kRootVars) setenv(var, "1", /*overwrite=*/1);
  }
  std::vector<char*> exec_argv;
  for (const std::string& word : command) exec_argv.push_back(const_cast<char*>(word.c_str()));
  exec_argv.push_back(nullptr);
  execvp(exec_argv[0], exec_argv.data());
  std::fprintf(stderr, "arcrun: cannot run %s: %s\n", options.mpirun.c_str(), std::strerror(errno));
  return 127;
}
