#include "launcher/runtime_flags.h"

#include <cmath>
#include <cstring>
#include <string>

#include "arcreduce/config.h"
#include "arcreduce/status.h"
#include "launcher/launch_options.h"
#include "launcher/numbers.h"
#include "runtime/config_fields.h"

namespace arcreduce::launcher {
namespace {

// Thrown by a setter whose text does not parse; carries what would have been accepted.
struct Unparsable {
  std::string expected;
};

double number(const std::string& text) {
  if (auto v = parse_number(text)) return *v;
  throw Unparsable{"a number"};
}

long long integer(const std::string& text) {
  if (auto v = parse_integer(text)) return *v;
  throw Unparsable{"an integer"};
}

// A flag with the Config field it sets: parsing into the field and then Config::validate() on
// an otherwise default Config gives exactly the runtime's accepted values and wording.
struct Entry {
  RuntimeFlag flag;
  void (*set)(const std::string& text, Config* config);
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      {{"--preset", kEnvPreset, "a set of settings: default, paper (the ARC-Top-K paper's)"},
       [](const std::string& t, Config* c) { *c = Config::preset(t); }},
      {{"--compressor", kEnvCompressor, "compressor: none, fp16, topk, randk, arctopk, ..."},
       [](const std::string& t, Config* c) { c->compressor = t; }},
      {{"--compress-ratio", kEnvCompressRatio, "fraction of gradient entries kept, in (0, 1]"},
       [](const std::string& t, Config* c) { c->compress_ratio = number(t); }},
      {{"--sketch-rank", kEnvSketchRank, "columns of the ARC-Top-K projection, >= 1"},
       [](const std::string& t, Config* c) {
         const long long v = integer(t);
         if (v < 1 || v > 1 << 30) throw Unparsable{"an integer >= 1"};
         c->sketch_rank = static_cast<int>(v);
       }},
      {{"--error-feedback", kEnvErrorFeedback, "error feedback: none, ef14, ef21, ef21m, efm"},
       [](const std::string& t, Config* c) { c->error_feedback = t; }},
      {{"--ef-eta", kEnvEfEta, "eta of ef21m and efm (1 - momentum), in (0, 1]"},
       [](const std::string& t, Config* c) { c->ef_momentum = number(t); }},
      // The former name, forwarded as the former variable, which the runtime still reads (with
      // a warning): scripts written for it keep working for a release.
      {{"--ef-momentum", kEnvEfMomentum, "deprecated: --ef-eta (it sets eta, not the momentum)"},
       [](const std::string& t, Config* c) { c->ef_momentum = number(t); }},
      {{"--warmup-steps", kEnvWarmupSteps, "dense steps per tensor before compression, >= 0"},
       [](const std::string& t, Config* c) { c->warmup_steps = integer(t); }},
      {{"--seed", kEnvSeed, "seed of every shared random choice, >= 0"},
       [](const std::string& t, Config* c) {
         const long long v = integer(t);
         if (v < 0) throw Unparsable{"an integer >= 0"};
         c->seed = static_cast<uint64_t>(v);
       }},
      {{"--fusion-threshold-mb", kEnvFusionThreshold, "bucket size in MiB, 0 disables fusion"},
       [](const std::string& t, Config* c) {
         const double mib = number(t);
         if (!(mib >= 0 && mib <= 1 << 30)) throw Unparsable{"MiB >= 0 (0 disables fusion)"};
         c->fusion_threshold = std::llround(mib * (1 << 20));
       }},
      {{"--cycle-time-ms", kEnvCycleTimeMs, "coordinator cycle in ms, in (0, 10000]"},
       [](const std::string& t, Config* c) { c->cycle_time_ms = number(t); }},
      {{"--timeline", kEnvTimeline, "Chrome-trace JSON written by rank 0 (path on rank 0's host)"},
       [](const std::string& t, Config* c) {
         if (t.empty()) throw Unparsable{"a path"};
         c->timeline = t;
       }},
      {{"--log-level", kEnvLogLevel, "runtime log level: trace, debug, info, warning, error"},
       [](const std::string& t, Config* c) { c->log_level = t; }},
      {{"--stall-check-seconds", kEnvStallCheckSeconds, "warn after this long, 0 disables"},
       [](const std::string& t, Config* c) { c->stall_check_seconds = number(t); }},
      {{"--stall-shutdown-seconds", kEnvStallShutdownSeconds, "abort after this long, 0 disables"},
       [](const std::string& t, Config* c) { c->stall_shutdown_seconds = number(t); }},
  };
  return table;
}

[[noreturn]] void reject(const RuntimeFlag& flag, const std::string& value,
                         const std::string& expected) {
  throw UsageError(std::string(flag.flag) + " '" + value + "' is invalid (" + flag.variable +
                   "): expected " + expected);
}

}  // namespace

const std::vector<RuntimeFlag>& runtime_flags() {
  static const std::vector<RuntimeFlag> flags = [] {
    std::vector<RuntimeFlag> list;
    for (const Entry& entry : entries()) list.push_back(entry.flag);
    return list;
  }();
  return flags;
}

std::string variable_value(const RuntimeFlag& flag, const std::string& value) {
  for (const Entry& entry : entries()) {
    if (std::strcmp(entry.flag.flag, flag.flag) != 0) continue;
    Config config;
    try {
      entry.set(value, &config);
      config.validate();
    } catch (const Unparsable& e) {
      reject(flag, value, e.expected);
    } catch (const Error& e) {
      // "VAR='x' is invalid: expected ...": keep the runtime's description of what is accepted.
      const std::string message = e.what();
      const size_t at = message.find("expected ");
      reject(flag, value, at == std::string::npos ? message : message.substr(at + 9));
    }
    if (std::strcmp(flag.variable, kEnvFusionThreshold) == 0) {
      return std::to_string(config.fusion_threshold);
    }
    return value;
  }
  throw UsageError(std::string("internal: unknown runtime flag ") + flag.flag);
}

}  // namespace arcreduce::launcher
