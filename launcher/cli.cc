#include "launcher/cli.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include <CLI/CLI.hpp>

#include "launcher/mpi_flavor.h"
#include "launcher/numbers.h"
#include "launcher/runtime_flags.h"

namespace arcreduce::launcher {
namespace {

// Raw strings as CLI11 collected them; checked and converted after parsing so that every
// message is arcrun's own one-liner.
struct RawArgs {
  std::string ranks;
  std::string host_list;
  std::string hostfile;
  std::vector<std::string> exports;
  std::vector<std::string> mpi_args;
  std::string ssh_port;
  std::string flavor;
  std::string restarts;
  std::string min_ranks;
  std::string max_ranks;
  std::optional<std::string> elastic_dir;
  std::optional<std::string> discovery_script;
  std::map<std::string, std::string> runtime;  // flag -> value
};

// Separates arcrun's words from the program's. A known option that takes a value consumes the
// next word, whatever it looks like; an unknown one consumes nothing (CLI11 then names it).
// mpirun's spelling "-np" becomes --np, since CLI11 reads a single dash as one-letter options.
void split_program(const CLI::App& app, const std::vector<std::string>& args,
                   std::vector<std::string>* own, std::vector<std::string>* program) {
  size_t i = 0;
  for (; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;
    if (arg == "-np") arg = "--np";
    own->push_back(arg);
    const CLI::Option* option = app.get_option_no_throw(arg);
    const bool takes_value = option != nullptr && option->get_items_expected_min() > 0;
    if (takes_value && i + 1 < args.size()) {
      own->push_back(args[++i]);  // the option's value, whatever it looks like
    }
  }
  program->assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
}

bool is_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

EnvSetting parse_export(const std::string& text) {
  const size_t eq = text.find('=');
  EnvSetting setting{text.substr(0, eq), std::nullopt};
  if (eq != std::string::npos) setting.value = text.substr(eq + 1);
  if (!is_variable_name(setting.name)) {
    throw UsageError("-x '" + text + "' is invalid: expected NAME or NAME=VALUE");
  }
  return setting;
}

// A rank count of --min-np or --max-np: 1..2^20, as -np.
int parse_rank_count(const std::string& text, const char* flag) {
  const auto ranks = parse_integer(text);
  if (!ranks || *ranks < 1 || *ranks > 1 << 20) {
    throw UsageError(std::string(flag) + " '" + text + "' is invalid: expected a positive integer");
  }
  return static_cast<int>(*ranks);
}

bool exports_variable(const LaunchOptions& options, const std::string& name) {
  return std::any_of(options.exported.begin(), options.exported.end(),
                     [&name](const EnvSetting& setting) { return setting.name == name; });
}

// --restarts, --elastic-dir, --host-discovery-script, --min-np, --max-np (docs/launcher.md,
// "Restarts"). Runs nothing: the script is run before each launch (elastic.h).
void convert_restarts(const RawArgs& raw, LaunchOptions* options) {
  if (!raw.restarts.empty()) {
    const auto restarts = parse_integer(raw.restarts);
    if (!restarts || *restarts < 0 || *restarts > kMaxRestarts) {
      throw UsageError("--restarts '" + raw.restarts + "' is invalid: expected an integer in 0.." +
                       std::to_string(kMaxRestarts));
    }
    options->restarts = static_cast<int>(*restarts);
  }
  if (options->restarts > 0 && exports_variable(*options, kRestartVariable)) {
    throw UsageError(std::string("-x ") + kRestartVariable +
                     " is arcrun's own with --restarts: " + "it counts the launches");
  }
  if (raw.elastic_dir) {
    if (raw.elastic_dir->empty() || raw.elastic_dir->find('\n') != std::string::npos) {
      throw UsageError("--elastic-dir '" + *raw.elastic_dir +
                       "' is invalid: expected a directory path");
    }
    if (exports_variable(*options, kElasticDirVariable)) {
      throw UsageError(std::string("--elastic-dir and -x ") + kElasticDirVariable +
                       " both name the directory; give one");
    }
    options->elastic_dir = *raw.elastic_dir;
  }
  if (raw.discovery_script) {
    if (raw.discovery_script->empty()) {
      throw UsageError("--host-discovery-script '' is invalid: expected an executable");
    }
    if (!options->hosts.empty()) {
      throw UsageError("--host-discovery-script and -H/--hostfile exclude each other; give one");
    }
    options->discovery_script = *raw.discovery_script;
  }
  if (!raw.min_ranks.empty()) options->min_ranks = parse_rank_count(raw.min_ranks, "--min-np");
  if (!raw.max_ranks.empty()) options->max_ranks = parse_rank_count(raw.max_ranks, "--max-np");
  if ((options->min_ranks || options->max_ranks) && options->discovery_script.empty()) {
    throw UsageError(std::string(options->min_ranks ? "--min-np" : "--max-np") +
                     " needs --host-discovery-script: without one, every launch runs -np ranks "
                     "on the same hosts");
  }
  const int ranks = options->ranks;
  if (options->min_ranks && options->max_ranks && *options->min_ranks > *options->max_ranks) {
    throw UsageError("--min-np " + std::to_string(*options->min_ranks) + " is more than --max-np " +
                     std::to_string(*options->max_ranks));
  }
  if (options->min_ranks && *options->min_ranks > ranks) {
    throw UsageError("--min-np " + std::to_string(*options->min_ranks) + " is more than -np " +
                     std::to_string(ranks));
  }
  if (options->max_ranks && *options->max_ranks < ranks) {
    throw UsageError("--max-np " + std::to_string(*options->max_ranks) + " is less than -np " +
                     std::to_string(ranks));
  }
}

// Checks the raw values and fills the options that come from them.
void convert(const RawArgs& raw, LaunchOptions* options) {
  const auto ranks = parse_integer(raw.ranks);
  if (!ranks || *ranks < 1 || *ranks > 1 << 20) {
    throw UsageError("-np '" + raw.ranks + "' is invalid: expected a positive integer");
  }
  options->ranks = static_cast<int>(*ranks);
  if (!raw.host_list.empty() && !raw.hostfile.empty()) {
    throw UsageError("-H and --hostfile exclude each other; give one");
  }
  if (!raw.host_list.empty()) options->hosts = parse_host_list(raw.host_list);
  if (!raw.hostfile.empty()) options->hosts = read_hostfile(raw.hostfile);
  for (const std::string& text : raw.exports) options->exported.push_back(parse_export(text));
  for (const std::string& text : raw.mpi_args) {
    for (std::string& word : split_words(text)) options->mpi_args.push_back(std::move(word));
  }
  if (!raw.ssh_port.empty()) {
    const auto port = parse_integer(raw.ssh_port);
    if (!port || *port < 1 || *port > 65535) {
      throw UsageError("--ssh-port '" + raw.ssh_port + "' is invalid: expected 1..65535");
    }
    options->ssh_port = std::to_string(*port);
  }
  // Open MPI hands the interface to remote daemons on their command line: keep it to the
  // characters of interface names, addresses and CIDR lists.
  const std::string& iface = options->network_interface;
  if (!iface.empty() && iface.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                                                "VWXYZ0123456789._:/,-") != std::string::npos) {
    throw UsageError("--network-interface '" + iface +
                     "' is invalid: expected interface names or CIDR ranges, comma-separated");
  }
  if (!raw.flavor.empty()) options->flavor = flavor_from_name(raw.flavor);
  for (const RuntimeFlag& flag : runtime_flags()) {
    auto it = raw.runtime.find(flag.flag);
    if (it == raw.runtime.end()) continue;
    options->flag_settings.push_back({flag.variable, variable_value(flag, it->second)});
  }
  convert_restarts(raw, options);
}

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args) {
  CommandLine result;
  LaunchOptions& options = result.options;
  RawArgs raw;
  CLI::App app("Start an arcreduce job through mpirun (docs/launcher.md).", "arcrun");
  app.add_option("-n,--np", raw.ranks, "number of ranks (also -np)")->required();
  app.add_option("-H,--host", raw.host_list, "hosts and slots: host1:slots,host2:slots");
  app.add_option("--hostfile", raw.hostfile, "file of lines 'host slots=N'");
  app.add_flag("--oversubscribe", options.oversubscribe, "allow more ranks than slots");
  app.add_option("-x", raw.exports, "forward NAME (or set NAME=VALUE) to every rank");
  app.add_option("--mpi-args", raw.mpi_args, "raw mpirun options, split on whitespace");
  app.add_option("--rsh-agent", options.rsh_agent, "remote start command (plm_rsh_agent)");
  app.add_option("--ssh-port", raw.ssh_port, "port of the remote start command");
  app.add_option("--network-interface", options.network_interface, "interface for MPI traffic");
  app.add_flag("--dry-run", options.dry_run, "print the mpirun command and exit");
  app.add_flag("--verbose", options.verbose, "print the mpirun command on stderr, then run it");
  app.add_option("--mpirun", options.mpirun, "mpirun to run (name on PATH or path)");
  app.add_option("--mpi-flavor", raw.flavor, "openmpi or mpich; skips `mpirun --version`");
  app.add_option("--restarts", raw.restarts,
                 "launch a failed job again, up to N times (default 0)");
  app.add_option_function<std::string>(
      "--elastic-dir", [&raw](const std::string& v) { raw.elastic_dir = v; },
      "directory for the job's commits (ARCRUN_ELASTIC_DIR); shared by all hosts");
  app.add_option_function<std::string>(
      "--host-discovery-script", [&raw](const std::string& v) { raw.discovery_script = v; },
      "executable printing 'host[:slots]' lines, run before each launch");
  app.add_option("--min-np", raw.min_ranks, "fewest ranks to (re)start with (default -np)");
  app.add_option("--max-np", raw.max_ranks, "most ranks to start (default -np)");
  for (const RuntimeFlag& flag : runtime_flags()) {
    app.add_option_function<std::string>(
        flag.flag, [&raw, &flag](const std::string& v) { raw.runtime[flag.flag] = v; },
        std::string(flag.help) + " (" + flag.variable + ")");
  }
  app.footer("Example: arcrun -np 4 -H a:2,b:2 --compress-ratio 0.01 -- ./train --epochs 3\n");

  std::vector<std::string> own;
  split_program(app, args, &own, &options.program);
  std::reverse(own.begin(), own.end());  // CLI11 consumes a vector from its back
  try {
    app.parse(own);
  } catch (const CLI::CallForHelp&) {
    result.help = app.help();
    return result;
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (try arcrun --help)");
  }
  convert(raw, &options);
  if (options.program.empty()) {
    throw UsageError("no program given (usage: arcrun -np N [options] [--] program [args...])");
  }
  if (options.program[0].empty() || options.program[0][0] == '-') {
    throw UsageError("program '" + options.program[0] + "' is not a program name");
  }
  return result;
}

}  // namespace arcreduce::launcher
