#include "arcreduce/config.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "arcreduce/build_config.h"
#include "arcreduce/status.h"
#include "compressors/feedback_kinds.h"
#include "runtime/config_fields.h"

extern char** environ;

namespace arcreduce {
namespace {

[[noreturn]] void reject(const std::string& var, const std::string& value,
                         const std::string& accepted) {
  throw Error(var + "='" + value + "' is invalid: expected " + accepted);
}

double parse_double(const std::string& var, const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(begin, &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    reject(var, value, "a finite number");
  }
  return v;
}

int64_t parse_int(const std::string& var, const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(begin, &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE) reject(var, value, "an integer");
  return v;
}

void check_choice(const std::string& var, const std::string& value,
                  const std::vector<std::string>& choices) {
  for (const auto& c : choices) {
    if (value == c) return;
  }
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  reject(var, value, "one of " + list);
}

}  // namespace

// The registry's rows (compressors/compressors.inc), names only: arcrun builds this file without
// the compressors.
const std::vector<std::string>& compressor_names() {
  static const std::vector<std::string> names = {
#define ARCREDUCE_NATIVE_PATH(name, ...) name,
#define ARCREDUCE_COMPRESSOR(name, ...) name,
#include "compressors/compressors.inc"
#undef ARCREDUCE_NATIVE_PATH
#undef ARCREDUCE_COMPRESSOR
  };
  return names;
}

const std::vector<std::string>& error_feedback_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const FeedbackRow& row : kFeedbackRows) v.push_back(row.name);
    return v;
  }();
  return names;
}

const std::vector<std::string>& granularity_names() {
  static const std::vector<std::string> names = {"element", "row"};
  return names;
}

const std::vector<std::string>& cuda_transport_names() {
  static const std::vector<std::string> names = {"auto", "nccl", "mpi"};
  return names;
}

const std::vector<std::string>& log_level_names() {
  static const std::vector<std::string> names = {"trace", "debug", "info", "warning", "error"};
  return names;
}

// Range checks shared by validate() and from_env(); `raw` holds the environment's spelling of a
// value so that messages quote what the user wrote.
static void validate_config(const Config& c, const std::map<std::string, std::string>& raw) {
  auto shown = [&](const char* var, const std::string& formatted) {
    auto it = raw.find(var);
    return it != raw.end() ? it->second : formatted;
  };
  auto reject = [&](const char* var, const std::string& formatted, const std::string& accepted) {
    arcreduce::reject(var, shown(var, formatted), accepted);
  };
  auto check_choice = [&](const char* var, const std::string& value,
                          const std::vector<std::string>& choices) {
    arcreduce::check_choice(var, shown(var, value), choices);
  };
  auto num = [](double v) { return fmt::format("{}", v); };
  check_choice(kEnvCompressor, c.compressor, compressor_names());
  if (!(c.compress_ratio > 0 && c.compress_ratio <= 1)) {
    reject(kEnvCompressRatio, num(c.compress_ratio), "a fraction in (0, 1], e.g. 0.01");
  }
  if (c.sketch_rank < 1) reject(kEnvSketchRank, std::to_string(c.sketch_rank), "an integer >= 1");
  // The bound from_env() applies, here too so that arcrun's --sketch-rank agrees with the ranks.
  if (c.sketch_rank > (1 << 20)) {
    reject(kEnvSketchRank, std::to_string(c.sketch_rank), "an integer <= 1048576");
  }
  check_choice(kEnvErrorFeedback, c.error_feedback, error_feedback_names());
  if (!(c.ef_momentum > 0 && c.ef_momentum <= 1)) {
    reject(kEnvEfEta, num(c.ef_momentum), "a number in (0, 1]");
  }
  if (!(c.random_rows >= 0 && c.random_rows <= 1)) {
    reject(kEnvRandomRows, num(c.random_rows), "a fraction in [0, 1]");
  }
  if (c.row_length < 0) reject(kEnvRowLength, std::to_string(c.row_length), "an integer >= 0");
  if (c.warmup_steps < 0)
    reject(kEnvWarmupSteps, std::to_string(c.warmup_steps), "an integer >= 0");
  if (c.min_compress_elements < 0) {
    reject(kEnvMinCompressElements, std::to_string(c.min_compress_elements), "an integer >= 0");
  }
  if (c.fusion_threshold < 0) {
    reject(kEnvFusionThreshold, std::to_string(c.fusion_threshold),
           "a size in bytes >= 0 (0 disables fusion)");
  }
  if (!(c.cycle_time_ms > 0 && c.cycle_time_ms <= 10000)) {
    reject(kEnvCycleTimeMs, num(c.cycle_time_ms), "milliseconds in (0, 10000]");
  }
  if (c.cache_capacity < 0 || c.cache_capacity > (1 << 20)) {
    reject(kEnvCacheCapacity, std::to_string(c.cache_capacity),
           "an integer in [0, 1048576] (0 disables the cache)");
  }
  if (!(c.stall_check_seconds >= 0)) {
    reject(kEnvStallCheckSeconds, num(c.stall_check_seconds), "seconds >= 0 (0 disables)");
  }
  if (!(c.stall_shutdown_seconds >= 0)) {
    reject(kEnvStallShutdownSeconds, num(c.stall_shutdown_seconds), "seconds >= 0 (0 disables)");
  }
  check_choice(kEnvLogLevel, c.log_level, log_level_names());
  check_choice(kEnvAllreduceAlgorithm, c.allreduce_algorithm, {"auto", "ring", "mpi", "doubling"});
  check_choice(kEnvGranularity, c.granularity, granularity_names());
  check_choice(kEnvEfInit, c.ef_init, {"warm", "zero"});
  if (c.oktopk_tau < 1) reject(kEnvOkTopkTau, std::to_string(c.oktopk_tau), "an integer >= 1");
  if (c.oktopk_tau_prime < 1) {
    reject(kEnvOkTopkTauPrime, std::to_string(c.oktopk_tau_prime), "an integer >= 1");
  }
  if (c.powersgd_rank < 1) {
    reject(kEnvPowerSgdRank, std::to_string(c.powersgd_rank), "an integer >= 1");
  }
  check_choice(kEnvCudaTransport, c.cuda_transport, cuda_transport_names());
  // wait_mode_names() (ops/mpi_wait.h) in the same order; this file is also built into arcrun,
  // which has no MPI headers.
  check_choice(kEnvWaitMode, c.wait_mode, {"sleep", "yield", "busy"});
  if (c.wait_max_sleep_us < 1 || c.wait_max_sleep_us > 100000) {
    reject(kEnvWaitMaxSleepUs, std::to_string(c.wait_max_sleep_us),
           "microseconds in [1, 100000], e.g. 200");
  }
  if (c.wait_spin_us < 0 || c.wait_spin_us > 1000000) {
    reject(kEnvWaitSpinUs, std::to_string(c.wait_spin_us),
           "microseconds in [0, 1000000], e.g. 1000");
  }
  if (c.batch_gap_us < 0 || c.batch_gap_us > 1000000) {
    reject(kEnvBatchGapUs, std::to_string(c.batch_gap_us),
           "microseconds in [0, 1000000], e.g. 100");
  }
  if (c.min_bucket_bytes < 0 || c.min_bucket_bytes > (int64_t{1} << 30)) {
    reject(kEnvMinBucketBytes, std::to_string(c.min_bucket_bytes),
           "bytes in [0, 1073741824], e.g. 1048576");
  }
  // Rejected at start-up rather than at the first CUDA bucket, where it would fail every op.
  if (!ARCREDUCE_NCCL && c.cuda_transport == "nccl") {
    reject(kEnvCudaTransport, c.cuda_transport,
           "auto or mpi (this build of arcreduce has no NCCL)");
  }
}

void Config::validate() const {
  validate_config(*this, {});
}

Config Config::preset(const std::string& name) {
  Config c;
  if (name == "default") return c;
  if (name != "paper") reject(kEnvPreset, name, "default or paper");
  // ARC-Top-K as its paper runs it. The paper does not give EF21M's eta or how its state starts:
  // those keep the runtime's defaults (ef_momentum, ef_init).
  c.compressor = "arctopk";
  c.compress_ratio = 0.2;
  c.sketch_rank = 4;
  c.row_length = 0;  // the tensor's natural rows
  c.random_rows = 0;
  c.error_feedback = "ef21m";
  c.warmup_steps = 1000;
  return c;
}

Config Config::from_env() {
  Config c;
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq || std::strncmp(*e, "ARCREDUCE_", 10) != 0) continue;
    env.emplace(std::string(*e, eq - *e), std::string(eq + 1));
  }
  std::set<std::string> known;
  for (const auto& field : config_variables()) known.insert(field);
  for (const auto& kv : env) {
    if (!known.count(kv.first)) {
      std::string list;
      for (const auto& k : config_variables()) list += (list.empty() ? "" : ", ") + k;
      throw Error(kv.first + "='" + kv.second + "' is not an arcreduce variable (known: " + list +
                  ")");
    }
  }
  auto get = [&](const char* var, auto&& apply) {
    auto it = env.find(var);
    if (it != env.end()) apply(it->first, it->second);
  };
  get(kEnvPreset, [&](auto&, auto& v) { c = preset(v); });  // first: the variables below win
  get(kEnvCompressor, [&](auto&, auto& v) { c.compressor = v; });
  get(kEnvCompressRatio, [&](auto& k, auto& v) { c.compress_ratio = parse_double(k, v); });
  get(kEnvSketchRank, [&](auto& k, auto& v) {
    int64_t r = parse_int(k, v);
    if (r < 1) reject(k, v, "an integer >= 1");
    if (r > 1 << 20) reject(k, v, "an integer <= 1048576");
    c.sketch_rank = static_cast<int>(r);
  });
  get(kEnvErrorFeedback, [&](auto&, auto& v) { c.error_feedback = v; });
  get(kEnvEfEta, [&](auto& k, auto& v) { c.ef_momentum = parse_double(k, v); });
  get(kEnvEfMomentum, [&](auto& k, auto& v) {
    const double eta = parse_double(k, v);
    const auto renamed = env.find(kEnvEfEta);
    if (renamed != env.end() && parse_double(renamed->first, renamed->second) != eta) {
      reject(k, v, std::string("the value of ") + kEnvEfEta + ", which replaces it (both are set)");
    }
    // Once per process: bindings read the configuration at every step.
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr,
                   "arcreduce: warning: %s is deprecated: it holds eta = 1 - momentum, as %s "
                   "does (%s=%s means momentum %g); use %s\n",
                   k.c_str(), kEnvEfEta, k.c_str(), v.c_str(), 1.0 - eta, kEnvEfEta);
    });
    c.ef_momentum = eta;
  });
  get(kEnvWarmupSteps, [&](auto& k, auto& v) { c.warmup_steps = parse_int(k, v); });
  get(kEnvMinCompressElements,
      [&](auto& k, auto& v) { c.min_compress_elements = parse_int(k, v); });
  get(kEnvSeed, [&](auto& k, auto& v) {
    int64_t s = parse_int(k, v);
    if (s < 0) reject(k, v, "an integer >= 0");
    c.seed = static_cast<uint64_t>(s);
  });
  get(kEnvFusionThreshold, [&](auto& k, auto& v) { c.fusion_threshold = parse_int(k, v); });
  get(kEnvCycleTimeMs, [&](auto& k, auto& v) { c.cycle_time_ms = parse_double(k, v); });
  get(kEnvCacheCapacity, [&](auto& k, auto& v) { c.cache_capacity = parse_int(k, v); });
  get(kEnvTimeline, [&](auto&, auto& v) { c.timeline = v; });
  get(kEnvStallCheckSeconds, [&](auto& k, auto& v) { c.stall_check_seconds = parse_double(k, v); });
  get(kEnvStallShutdownSeconds,
      [&](auto& k, auto& v) { c.stall_shutdown_seconds = parse_double(k, v); });
  get(kEnvLogLevel, [&](auto&, auto& v) { c.log_level = v; });
  get(kEnvAllreduceAlgorithm, [&](auto&, auto& v) { c.allreduce_algorithm = v; });
  get(kEnvGranularity, [&](auto&, auto& v) { c.granularity = v; });
  get(kEnvEfInit, [&](auto&, auto& v) { c.ef_init = v; });
  get(kEnvCheckConsistency, [&](auto& k, auto& v) {
    if (v != "0" && v != "1") reject(k, v, "0 or 1");
    c.check_consistency = v == "1";
  });
  get(kEnvRandomRows, [&](auto& k, auto& v) { c.random_rows = parse_double(k, v); });
  get(kEnvRowLength, [&](auto& k, auto& v) { c.row_length = parse_int(k, v); });
  get(kEnvEfMasking, [&](auto& k, auto& v) {
    if (v != "0" && v != "1") reject(k, v, "0 or 1");
    c.ef_masking = v == "1";
  });
  get(kEnvOkTopkTau, [&](auto& k, auto& v) { c.oktopk_tau = parse_int(k, v); });
  get(kEnvOkTopkTauPrime, [&](auto& k, auto& v) { c.oktopk_tau_prime = parse_int(k, v); });
  get(kEnvOkTopkRebalance, [&](auto& k, auto& v) {
    if (v != "0" && v != "1") reject(k, v, "0 or 1");
    c.oktopk_rebalance = v == "1";
  });
  get(kEnvPowerSgdRank, [&](auto& k, auto& v) { c.powersgd_rank = parse_int(k, v); });
  get(kEnvCudaTransport, [&](auto&, auto& v) { c.cuda_transport = v; });
  get(kEnvWaitMode, [&](auto&, auto& v) { c.wait_mode = v; });
  get(kEnvWaitMaxSleepUs, [&](auto& k, auto& v) { c.wait_max_sleep_us = parse_int(k, v); });
  get(kEnvWaitSpinUs, [&](auto& k, auto& v) { c.wait_spin_us = parse_int(k, v); });
  get(kEnvBatchGapUs, [&](auto& k, auto& v) { c.batch_gap_us = parse_int(k, v); });
  get(kEnvMinBucketBytes, [&](auto& k, auto& v) { c.min_bucket_bytes = parse_int(k, v); });
  get(kEnvBatchCompressed, [&](auto& k, auto& v) {
    if (v != "0" && v != "1" && v != "auto") reject(k, v, "0, 1 or auto");
    c.batch_compressed = v == "auto" ? CompressedBatching::kAuto
                         : v == "1"  ? CompressedBatching::kOn
                                     : CompressedBatching::kOff;
  });
  validate_config(c, env);
  return c;
}

}  // namespace arcreduce
