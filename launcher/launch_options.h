// The data that flows through arcrun: what the command line asks for (LaunchOptions, filled by
// cli.h), the facts about this machine and caller that the command depends on (LaunchContext,
// injected so that tests can vary them), and the result (Command, built by command.h).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launcher/hosts.h"

namespace arcreduce::launcher {

// Bad input or a failed start: arcrun prints "arcrun: <what()>" as one line on stderr and exits
// with exit_code() (2 for bad input, 127 when mpirun cannot be found or run).
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message, int exit_code = 2)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

enum class MpiFlavor { kOpenMpi, kMpich };

// Variables arcrun sets for the ranks of a job it may restart (docs/launcher.md, "Restarts").
inline constexpr const char* kElasticDirVariable = "ARCRUN_ELASTIC_DIR";
inline constexpr const char* kRestartVariable = "ARCRUN_RESTART";
inline constexpr int kMaxRestarts = 10000;  // bound of --restarts

// A variable for every rank: value nullopt forwards the caller's value under that name.
struct EnvSetting {
  std::string name;
  std::optional<std::string> value;
};

struct LaunchOptions {
  int ranks = 0;
  std::vector<Host> hosts;  // from -H or --hostfile; empty: this machine only
  bool oversubscribe = false;
  std::vector<EnvSetting> exported;       // -x NAME[=VALUE], in the order given
  std::vector<EnvSetting> flag_settings;  // ARCREDUCE_* set by arcrun's runtime flags (validated)
  std::vector<std::string> mpi_args;      // --mpi-args, split into words
  std::string rsh_agent;                  // --rsh-agent, empty: mpirun's default (ssh)
  std::string ssh_port;                   // --ssh-port, empty: the agent's default
  std::string network_interface;          // --network-interface, empty: all
  bool dry_run = false;
  bool verbose = false;
  std::string mpirun = "mpirun";     // --mpirun: a name looked up on PATH, or a path
  std::optional<MpiFlavor> flavor;   // --mpi-flavor; nullopt: detect from `mpirun --version`
  std::vector<std::string> program;  // program and its arguments, never empty after parsing

  // Restarts (docs/launcher.md, "Restarts").
  int restarts = 0;              // --restarts N: relaunches of a failed job; 0: none
  std::string elastic_dir;       // --elastic-dir, or the directory arcrun created
  std::string discovery_script;  // --host-discovery-script, empty: fixed hosts
  std::optional<int> min_ranks;  // --min-np; nullopt: -np
  std::optional<int> max_ranks;  // --max-np; nullopt: -np
  int restart = 0;               // which launch this is: 0 first, then 1..restarts
};

struct LaunchContext {
  bool as_root = false;                  // effective user id 0
  int local_cpus = 1;                    // CPUs this process may run on
  std::vector<std::string> environment;  // the caller's "NAME=VALUE" entries
  MpiFlavor flavor = MpiFlavor::kOpenMpi;
  std::string mpirun_path = "mpirun";  // argv[0] of the command (resolved executable)
};

struct Command {
  // Set in mpirun's own environment before it starts (Open MPI's root confirmation).
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> argv;
};

}  // namespace arcreduce::launcher
