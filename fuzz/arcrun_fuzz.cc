// Fuzz target: arcrun's command line (launcher/cli.h) and the mpirun command built from it.
// Input: the words after argv[0], separated by NUL bytes (no argument can hold one). Words that
// would make the parser read a file (--hostfile; hostfiles have their own target) are skipped.
// Contract: parse_command_line() returns options within their documented ranges whose runtime
// flags set ARCREDUCE_* values that Config::from_env() accepts (arcrun promises the ranks the
// same verdict), and build_command() then returns a command or throws UsageError; otherwise
// UsageError with a message. Nothing else may escape.
#include <cstdlib>
#include <string>
#include <vector>

#include "arcreduce/config.h"
#include "arcreduce/status.h"
#include "fuzz/fuzz_support.h"
#include "launcher/cli.h"
#include "launcher/command.h"
#include "launcher/launch_options.h"

namespace {

using arcreduce::fuzz::check;

// The runtime's verdict on `name`=`value` alone.
void check_runtime_accepts(const std::string& name, const std::string& value) {
  setenv(name.c_str(), value.c_str(), 1);
  try {
    arcreduce::Config::from_env();
  } catch (const arcreduce::Error& e) {
    unsetenv(name.c_str());
    check(false,
          "arcrun accepted " + name + "='" + value + "' but the runtime rejects it: " + e.what());
  }
  unsetenv(name.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arcreduce::launcher;
  const std::vector<std::string> args =
      arcreduce::fuzz::split(std::string(reinterpret_cast<const char*>(data), size), '\0');
  for (const std::string& arg : args) {
    if (arg.rfind("--hostfile", 0) == 0) return 0;
  }
  CommandLine line;
  try {
    line = parse_command_line(args);
  } catch (const UsageError& e) {
    arcreduce::fuzz::check_message(e.what(), "parse_command_line()");
    check(e.exit_code() == 2, "bad input must exit with 2");
    return 0;
  }
  if (!line.help.empty()) return 0;
  const LaunchOptions& options = line.options;
  check(options.ranks >= 1 && options.ranks <= 1 << 20, "rank count out of range accepted");
  check(!options.program.empty() && !options.program[0].empty() && options.program[0][0] != '-',
        "a missing or option-like program was accepted");
  for (const Host& host : options.hosts) check(host.slots > 0, "a host with no slots accepted");
  for (const EnvSetting& setting : options.flag_settings) {
    check(setting.value.has_value(), "a runtime flag set no value");
    check_runtime_accepts(setting.name, *setting.value);
  }
  for (MpiFlavor flavor : {MpiFlavor::kOpenMpi, MpiFlavor::kMpich}) {
    LaunchContext context;
    context.as_root = true;
    context.local_cpus = 2;
    context.flavor = flavor;
    try {
      const Command command = build_command(options, context);
      check(!command.argv.empty(), "build_command() returned an empty argv");
      check(!format_command(command).empty(), "format_command() returned nothing");
    } catch (const UsageError& e) {
      arcreduce::fuzz::check_message(e.what(), "build_command()");
    }
  }
  return 0;
}
