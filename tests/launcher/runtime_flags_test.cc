// Every runtime flag: its variable, the value it forwards, and its rejections.
#include "launcher/runtime_flags.h"

#include <gtest/gtest.h>

#include "launcher/launch_options.h"
#include "runtime/config_fields.h"

namespace arcreduce::launcher {
namespace {

const RuntimeFlag& flag(const std::string& name) {
  for (const RuntimeFlag& f : runtime_flags()) {
    if (name == f.flag) return f;
  }
  throw std::runtime_error("no flag " + name);
}

std::string error_of(const std::string& name, const std::string& value) {
  try {
    variable_value(flag(name), value);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RuntimeFlags, EveryFlagMapsToItsVariable) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"--preset", "ARCREDUCE_PRESET"},
      {"--compressor", "ARCREDUCE_COMPRESSOR"},
      {"--compress-ratio", "ARCREDUCE_COMPRESS_RATIO"},
      {"--sketch-rank", "ARCREDUCE_SKETCH_RANK"},
      {"--error-feedback", "ARCREDUCE_ERROR_FEEDBACK"},
      {"--ef-eta", "ARCREDUCE_EF_ETA"},
      {"--ef-momentum", "ARCREDUCE_EF_MOMENTUM"},
      {"--warmup-steps", "ARCREDUCE_WARMUP_STEPS"},
      {"--seed", "ARCREDUCE_SEED"},
      {"--fusion-threshold-mb", "ARCREDUCE_FUSION_THRESHOLD"},
      {"--cycle-time-ms", "ARCREDUCE_CYCLE_TIME_MS"},
      {"--timeline", "ARCREDUCE_TIMELINE"},
      {"--log-level", "ARCREDUCE_LOG_LEVEL"},
      {"--stall-check-seconds", "ARCREDUCE_STALL_CHECK_SECONDS"},
      {"--stall-shutdown-seconds", "ARCREDUCE_STALL_SHUTDOWN_SECONDS"},
  };
  ASSERT_EQ(runtime_flags().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(runtime_flags()[i].flag, expected[i].first);
    EXPECT_EQ(runtime_flags()[i].variable, expected[i].second);
    // Every target is a variable the runtime knows.
    const auto& known = config_variables();
    EXPECT_NE(std::find(known.begin(), known.end(), expected[i].second), known.end());
  }
}

TEST(RuntimeFlags, ValidValuesAreForwardedAsWritten) {
  const std::vector<std::pair<std::string, std::string>> valid = {
      {"--preset", "paper"},
      {"--preset", "default"},
      {"--compressor", "powersgd"},
      {"--compress-ratio", "1"},
      {"--compress-ratio", "0.010"},
      {"--sketch-rank", "8"},
      {"--error-feedback", "ef14"},
      {"--ef-eta", "0.5"},
      {"--ef-momentum", "0.5"},
      {"--warmup-steps", "0"},
      {"--seed", "18446744"},
      {"--cycle-time-ms", "10000"},
      {"--timeline", "/tmp/my trace;1.json"},
      {"--log-level", "trace"},
      {"--stall-check-seconds", "0"},
      {"--stall-shutdown-seconds", "2.5"},
  };
  for (const auto& [name, value] : valid) {
    EXPECT_EQ(variable_value(flag(name), value), value) << name;
  }
}

TEST(RuntimeFlags, UnknownPresetNamesTheAcceptedOnes) {
  const std::string message = error_of("--preset", "paperr");
  EXPECT_NE(message.find("--preset 'paperr' is invalid (ARCREDUCE_PRESET)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("default or paper"), std::string::npos) << message;
}

TEST(RuntimeFlags, FusionThresholdIsMebibytesToBytes) {
  EXPECT_EQ(variable_value(flag("--fusion-threshold-mb"), "64"), "67108864");
  EXPECT_EQ(variable_value(flag("--fusion-threshold-mb"), "0"), "0");
  EXPECT_EQ(variable_value(flag("--fusion-threshold-mb"), "0.5"), "524288");
}

TEST(RuntimeFlags, ErrorMessages) {
  const std::vector<std::tuple<std::string, std::string, std::string>> table = {
      {"--compressor", "zip",
       "--compressor 'zip' is invalid (ARCREDUCE_COMPRESSOR): expected one of none, fp16, topk, "
       "randk, arctopk, oktopk, powersgd"},
      {"--compress-ratio", "0",
       "--compress-ratio '0' is invalid (ARCREDUCE_COMPRESS_RATIO): expected a fraction in (0, "
       "1], e.g. 0.01"},
      {"--compress-ratio", "1%",
       "--compress-ratio '1%' is invalid (ARCREDUCE_COMPRESS_RATIO): expected a number"},
      {"--sketch-rank", "0",
       "--sketch-rank '0' is invalid (ARCREDUCE_SKETCH_RANK): expected an integer >= 1"},
      {"--sketch-rank", "2.5",
       "--sketch-rank '2.5' is invalid (ARCREDUCE_SKETCH_RANK): expected an integer"},
      {"--error-feedback", "ef99",
       "--error-feedback 'ef99' is invalid (ARCREDUCE_ERROR_FEEDBACK): expected one of none, "
       "ef14, ef21, ef21m, efm"},
      {"--ef-eta", "1.5",
       "--ef-eta '1.5' is invalid (ARCREDUCE_EF_ETA): expected a number in (0, 1]"},
      {"--warmup-steps", "-1",
       "--warmup-steps '-1' is invalid (ARCREDUCE_WARMUP_STEPS): expected an integer >= 0"},
      {"--seed", "-3", "--seed '-3' is invalid (ARCREDUCE_SEED): expected an integer >= 0"},
      {"--fusion-threshold-mb", "-1",
       "--fusion-threshold-mb '-1' is invalid (ARCREDUCE_FUSION_THRESHOLD): expected MiB >= 0 (0 "
       "disables fusion)"},
      {"--cycle-time-ms", "0",
       "--cycle-time-ms '0' is invalid (ARCREDUCE_CYCLE_TIME_MS): expected milliseconds in (0, "
       "10000]"},
      {"--timeline", "", "--timeline '' is invalid (ARCREDUCE_TIMELINE): expected a path"},
      {"--log-level", "loud",
       "--log-level 'loud' is invalid (ARCREDUCE_LOG_LEVEL): expected one of trace, debug, info, "
       "warning, error"},
      {"--stall-check-seconds", "-1",
       "--stall-check-seconds '-1' is invalid (ARCREDUCE_STALL_CHECK_SECONDS): expected seconds "
       ">= 0 (0 disables)"},
      {"--stall-shutdown-seconds", "nan",
       "--stall-shutdown-seconds 'nan' is invalid (ARCREDUCE_STALL_SHUTDOWN_SECONDS): expected a "
       "number"},
  };
  for (const auto& [name, value, message] : table) EXPECT_EQ(error_of(name, value), message);
}

}  // namespace
}  // namespace arcreduce::launcher
