// arcrun's command line: `arcrun -np N [options] [--] program [args...]` (docs/launcher.md).
#pragma once

#include <string>
#include <vector>

#include "launcher/launch_options.h"

namespace arcreduce::launcher {

struct CommandLine {
  LaunchOptions options;
  std::string help;  // non-empty when --help was asked for: print it and exit 0
};

// Parses the words after argv[0]. The program starts after "--" or at the first word that is
// neither an option nor an option's value. Reads the hostfile, checks every value and resolves
// runtime flags to ARCREDUCE_* settings; throws UsageError (exit code 2) with one line.
CommandLine parse_command_line(const std::vector<std::string>& args);

// Splits --mpi-args text into words: whitespace separates; '...' is literal; "..." is literal
// except that \" and \\ stand for " and \; outside quotes \ takes the next character literally.
// Throws UsageError on an unterminated quote or a trailing backslash.
std::vector<std::string> split_words(const std::string& text);

}  // namespace arcreduce::launcher
