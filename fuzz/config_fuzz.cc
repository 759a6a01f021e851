// Fuzz target: Config::from_env() over fuzzed ARCREDUCE_* values.
// Input: lines; a line's first byte picks a variable (one of config_variables(), or one unknown
// ARCREDUCE_ name), the rest is its value (cut at a NUL, as the environment would). Contract:
// from_env() returns a Config that validate() accepts and that holds the text variables as
// given, or throws Error naming an ARCREDUCE_ variable; an unknown variable is always rejected.
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "arcreduce/config.h"
#include "arcreduce/status.h"
#include "fuzz/fuzz_support.h"
#include "runtime/config_fields.h"

extern char** environ;

namespace {

using arcreduce::fuzz::check;

constexpr const char* kUnknown = "ARCREDUCE_NOT_A_VARIABLE";

void clear_arcreduce_environment() {
  std::vector<std::string> names;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "ARCREDUCE_", 10) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    names.emplace_back(*e, eq ? static_cast<size_t>(eq - *e) : std::strlen(*e));
  }
  for (const std::string& name : names) unsetenv(name.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arcreduce;
  const std::vector<std::string>& variables = config_variables();
  clear_arcreduce_environment();
  std::map<std::string, std::string> set;  // what the environment now holds
  for (std::string line :
       fuzz::split(std::string(reinterpret_cast<const char*>(data), size), '\n')) {
    if (line.empty()) continue;
    const size_t pick = static_cast<unsigned char>(line[0]) % (variables.size() + 1);
    const std::string name = pick < variables.size() ? variables[pick] : kUnknown;
    std::string value = line.substr(1);
    value = value.substr(0, value.find('\0'));
    setenv(name.c_str(), value.c_str(), 1);
    set[name] = value;
  }
  try {
    const Config c = Config::from_env();
    check(!set.count(kUnknown), "an unknown ARCREDUCE_ variable was accepted");
    try {
      c.validate();
    } catch (const Error& e) {
      check(false,
            std::string("from_env() returned a Config that validate() rejects: ") + e.what());
    }
    auto same = [&](const char* var, const std::string& field) {
      auto it = set.find(var);
      check(it == set.end() || it->second == field,
            std::string(var) + " was accepted but not stored as given");
    };
    same(kEnvCompressor, c.compressor);
    same(kEnvErrorFeedback, c.error_feedback);
    same(kEnvTimeline, c.timeline);
    same(kEnvLogLevel, c.log_level);
    same(kEnvAllreduceAlgorithm, c.allreduce_algorithm);
    same(kEnvGranularity, c.granularity);
    same(kEnvEfInit, c.ef_init);
    same(kEnvCudaTransport, c.cuda_transport);
    same(kEnvWaitMode, c.wait_mode);
    same(kEnvCheckConsistency, c.check_consistency ? "1" : "0");
    same(kEnvOkTopkRebalance, c.oktopk_rebalance ? "1" : "0");
  } catch (const Error& e) {
    fuzz::check_message(e.what(), "Config::from_env()");
    check(std::strstr(e.what(), "ARCREDUCE_") != nullptr,
          std::string("from_env() error names no variable: ") + e.what());
  }
  clear_arcreduce_environment();
  return 0;
}
