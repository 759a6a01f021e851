#include "launcher/command.h"

#include <map>
#include <optional>

namespace arcreduce::launcher {
namespace {

// Open MPI refuses to start as root unless told twice: the flag and these two variables.
constexpr const char* kOmpiRootVars[] = {"OMPI_ALLOW_RUN_AS_ROOT",
                                         "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"};

using Variables = std::map<std::string, std::optional<std::string>>;

Variables rank_variables(const LaunchOptions& options, const LaunchContext& context) {
  Variables vars;
  const std::string elastic_dir = std::string(kElasticDirVariable) + "=";
  for (const std::string& entry : context.environment) {
    if (entry.rfind("ARCREDUCE_", 0) == 0 || entry.rfind(elastic_dir, 0) == 0) {
      vars[entry.substr(0, entry.find('='))] = std::nullopt;
    }
  }
  for (const EnvSetting& setting : options.exported) vars[setting.name] = setting.value;
  for (const EnvSetting& setting : options.flag_settings) vars[setting.name] = setting.value;
  // arcrun's own: --elastic-dir (parsing refuses it beside -x ARCRUN_ELASTIC_DIR) or the
  // directory it created, and the launch's number when it may restart the job.
  if (!options.elastic_dir.empty()) vars[kElasticDirVariable] = options.elastic_dir;
  if (options.restarts > 0) vars[kRestartVariable] = std::to_string(options.restart);
  return vars;
}

void append(std::vector<std::string>* argv, std::initializer_list<std::string> words) {
  argv->insert(argv->end(), words);
}

void open_mpi_options(const LaunchOptions& options, const LaunchContext& context,
                      Command* command) {
  std::vector<std::string>& argv = command->argv;
  if (!options.hosts.empty()) append(&argv, {"--host", format_host_list(options.hosts)});
  // No binding: the coordinator thread needs a core beside the framework's threads.
  append(&argv, {"--bind-to", "none", "--map-by", "slot"});
  if (context.as_root) {
    argv.push_back("--allow-run-as-root");
    for (const char* var : kOmpiRootVars) command->env.emplace_back(var, "1");
  }
  const bool local = options.hosts.empty();
  if (options.oversubscribe || (local && options.ranks > context.local_cpus)) {
    argv.push_back("--oversubscribe");
  }
  // Locally, count logical CPUs as slots (Open MPI counts cores), so that Open MPI's idea of
  // "enough slots" is the CPU count arcrun compared against.
  if (local) argv.push_back("--use-hwthread-cpus");
  if (!options.rsh_agent.empty()) append(&argv, {"--mca", "plm_rsh_agent", options.rsh_agent});
  if (!options.ssh_port.empty()) append(&argv, {"--mca", "plm_rsh_args", "-p " + options.ssh_port});
  if (!options.network_interface.empty()) {
    append(&argv, {"--mca", "btl_tcp_if_include", options.network_interface, "--mca",
                   "oob_tcp_if_include", options.network_interface});
  }
  for (const auto& [name, value] : rank_variables(options, context)) {
    append(&argv, {"-x", value ? name + "=" + *value : name});
  }
}

// Hydra: no root check and no slot limit (it places extra ranks round-robin), so neither the
// root flags nor --oversubscribe have a counterpart.
void mpich_options(const LaunchOptions& options, const LaunchContext& context, Command* command) {
  if (!options.rsh_agent.empty() || !options.ssh_port.empty()) {
    throw UsageError(std::string(options.rsh_agent.empty() ? "--ssh-port" : "--rsh-agent") +
                     " is not supported with MPICH (Hydra); pass Hydra's launcher options "
                     "with --mpi-args");
  }
  std::vector<std::string>& argv = command->argv;
  if (!options.hosts.empty()) append(&argv, {"-hosts", format_host_list(options.hosts)});
  append(&argv, {"-bind-to", "none"});
  if (!options.network_interface.empty()) append(&argv, {"-iface", options.network_interface});
  std::string by_name;
  for (const auto& [name, value] : rank_variables(options, context)) {
    if (value) {
      append(&argv, {"-genv", name, *value});
    } else {
      by_name += (by_name.empty() ? "" : ",") + name;
    }
  }
  if (!by_name.empty()) append(&argv, {"-genvlist", by_name});
}

}  // namespace

Command build_command(const LaunchOptions& options, const LaunchContext& context) {
  if (!options.hosts.empty() && !options.oversubscribe &&
      options.ranks > total_slots(options.hosts)) {
    throw UsageError("-np " + std::to_string(options.ranks) + " is more than the " +
                     std::to_string(total_slots(options.hosts)) +
                     " slots of the given hosts; add slots or --oversubscribe");
  }
  Command command;
  command.argv = {context.mpirun_path, "-np", std::to_string(options.ranks)};
  if (context.flavor == MpiFlavor::kOpenMpi) {
    open_mpi_options(options, context, &command);
  } else {
    mpich_options(options, context, &command);
  }
  command.argv.insert(command.argv.end(), options.mpi_args.begin(), options.mpi_args.end());
  command.argv.insert(command.argv.end(), options.program.begin(), options.program.end());
  return command;
}

std::string shell_quote(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-./=:,+@%") == std::string::npos;
  if (safe) return word;
  std::string quoted = "'";
  for (char c : word) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string format_command(const Command& command) {
  std::string line;
  for (const auto& [name, value] : command.env) line += name + "=" + shell_quote(value) + " ";
  for (const std::string& word : command.argv) line += shell_quote(word) + " ";
  if (!line.empty()) line.pop_back();
  return line;
}

}  // namespace arcreduce::launcher
