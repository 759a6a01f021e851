// arcrun flags that set ARCREDUCE_* variables for every rank (docs/launcher.md lists them): the
// rows of the settings table (runtime/settings.inc) that name a flag, in its order. Values are
// checked here, before any rank starts, against the same accepted sets and ranges as
// Config::validate() (docs/configuration.md), so a bad value is one line from arcrun instead of
// an init() failure on every rank.
#pragma once

#include <string>
#include <vector>

namespace arcreduce::launcher {

struct RuntimeFlag {
  const char* flag;      // "--compress-ratio"
  const char* variable;  // "ARCREDUCE_COMPRESS_RATIO"
  const char* help;
};

// Every runtime flag, in the order --help shows them.
const std::vector<RuntimeFlag>& runtime_flags();

// Checks `value` given to `flag` (one of runtime_flags()) and returns the variable's value: the
// text as written, except for a flag in another unit than its variable (--fusion-threshold-mb,
// MiB), whose value is converted (bytes: MiB * 1048576, rounded).
// Throws UsageError naming the flag, the value, the variable and what is accepted.
std::string variable_value(const RuntimeFlag& flag, const std::string& value);

}  // namespace arcreduce::launcher
