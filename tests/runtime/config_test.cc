#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "arcreduce/build_config.h"
#include "arcreduce/config.h"
#include "ops/allreduce_algorithm.h"
#include "ops/mpi_wait.h"
#include "runtime/config_agreement.h"
#include "runtime/config_fields.h"
#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace {

using ::testing::HasSubstr;

// Sets one variable for the scope of a test and clears every ARCREDUCE_* variable around it.
class EnvGuard {
 public:
  EnvGuard() { clear(); }
  ~EnvGuard() { clear(); }
  void set(const std::string& k, const std::string& v) { setenv(k.c_str(), v.c_str(), 1); }

 private:
  static void clear() {
    for (const auto& v : config_variables()) unsetenv(v.c_str());
    unsetenv("ARCREDUCE_FOO");
  }
};

TEST(Config, DefaultsAreValid) {
  EnvGuard env;
  Config c = Config::from_env();
  EXPECT_EQ(c.compressor, "arctopk");
  EXPECT_EQ(c.fusion_threshold, 64ll << 20);
  EXPECT_EQ(c.cache_capacity, 1024);
  EXPECT_EQ(c.log_level, "warning");
  EXPECT_GT(c.stall_shutdown_seconds, 0);  // finite by default
  EXPECT_EQ(c.cuda_transport, "auto");
  EXPECT_EQ(c.wait_mode, "sleep");
  EXPECT_EQ(c.wait_max_sleep_us, 2000);
  EXPECT_EQ(c.wait_spin_us, 1000);
  EXPECT_EQ(c.batch_gap_us, 100);
  EXPECT_EQ(c.min_bucket_bytes, 1 << 20);
  EXPECT_EQ(c.batch_compressed, CompressedBatching::kAuto);
}

TEST(Config, PaperPresetSetsThePapersChoices) {
  EnvGuard env;
  env.set("ARCREDUCE_PRESET", "paper");
  const Config c = Config::from_env();
  EXPECT_EQ(c.compressor, "arctopk");
  EXPECT_EQ(c.compress_ratio, 0.2);
  EXPECT_EQ(c.sketch_rank, 4);
  EXPECT_EQ(c.row_length, 0);
  EXPECT_EQ(c.random_rows, 0.0);
  EXPECT_EQ(c.error_feedback, "ef21m");
  EXPECT_EQ(c.warmup_steps, 1000);
  // What the paper does not give keeps the runtime's defaults.
  EXPECT_EQ(c.ef_momentum, Config().ef_momentum);
  EXPECT_EQ(c.ef_init, Config().ef_init);
  EXPECT_EQ(c.fusion_threshold, Config().fusion_threshold);
}

TEST(Config, VariablesOverrideThePresetWhateverTheirOrder) {
  EnvGuard env;
  env.set("ARCREDUCE_COMPRESS_RATIO", "0.05");
  env.set("ARCREDUCE_PRESET", "paper");
  env.set("ARCREDUCE_WARMUP_STEPS", "10");
  const Config c = Config::from_env();
  EXPECT_EQ(c.compress_ratio, 0.05);
  EXPECT_EQ(c.warmup_steps, 10);
  EXPECT_EQ(c.sketch_rank, 4);  // still the preset's
}

TEST(Config, DefaultPresetIsTheDefaults) {
  EnvGuard env;
  env.set("ARCREDUCE_PRESET", "default");
  const Config c = Config::from_env();
  EXPECT_EQ(c.compress_ratio, Config().compress_ratio);
  EXPECT_EQ(c.error_feedback, Config().error_feedback);
  // An unknown name: BadConfig below.
  EXPECT_NO_THROW(Config::preset("paper").validate());
}

TEST(Config, EfMomentumIsTheFormerNameOfEfEta) {
  EnvGuard env;
  env.set("ARCREDUCE_EF_MOMENTUM", "0.05");  // still read (with a warning): eta, momentum 0.95
  EXPECT_EQ(Config::from_env().ef_momentum, 0.05);
  env.set("ARCREDUCE_EF_ETA", "0.05");  // both, agreeing
  EXPECT_EQ(Config::from_env().ef_momentum, 0.05);
  env.set("ARCREDUCE_EF_ETA", "0.1");  // both, disagreeing: refused, naming the new name
  try {
    Config::from_env();
    FAIL() << "ARCREDUCE_EF_MOMENTUM and ARCREDUCE_EF_ETA disagreeing were accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("ARCREDUCE_EF_MOMENTUM"));
    EXPECT_THAT(e.what(), HasSubstr("ARCREDUCE_EF_ETA"));
  }
}

TEST(Config, ReadsEveryVariable) {
  EnvGuard env;
  env.set("ARCREDUCE_COMPRESSOR", "topk");
  env.set("ARCREDUCE_COMPRESS_RATIO", "0.1");
  env.set("ARCREDUCE_SKETCH_RANK", "8");
  env.set("ARCREDUCE_ERROR_FEEDBACK", "ef14");
  env.set("ARCREDUCE_EF_ETA", "0.5");
  env.set("ARCREDUCE_WARMUP_STEPS", "3");
  env.set("ARCREDUCE_MIN_COMPRESS_ELEMENTS", "100");
  env.set("ARCREDUCE_SEED", "42");
  env.set("ARCREDUCE_FUSION_THRESHOLD", "0");
  env.set("ARCREDUCE_CYCLE_TIME_MS", "2.5");
  env.set("ARCREDUCE_CACHE_CAPACITY", "0");
  env.set("ARCREDUCE_TIMELINE", "/tmp/t.json");
  env.set("ARCREDUCE_STALL_CHECK_SECONDS", "5");
  env.set("ARCREDUCE_STALL_SHUTDOWN_SECONDS", "0");
  env.set("ARCREDUCE_LOG_LEVEL", "debug");
  env.set("ARCREDUCE_ALLREDUCE_ALGORITHM", "ring");
  env.set("ARCREDUCE_GRANULARITY", "row");
  env.set("ARCREDUCE_EF_INIT", "zero");
  env.set("ARCREDUCE_CHECK_CONSISTENCY", "1");
  env.set("ARCREDUCE_OKTOPK_TAU", "16");
  env.set("ARCREDUCE_OKTOPK_TAU_PRIME", "128");
  env.set("ARCREDUCE_OKTOPK_REBALANCE", "1");
  env.set("ARCREDUCE_POWERSGD_RANK", "4");
  env.set("ARCREDUCE_CUDA_TRANSPORT", "mpi");
  env.set("ARCREDUCE_WAIT_MODE", "yield");
  env.set("ARCREDUCE_WAIT_MAX_SLEEP_US", "750");
  env.set("ARCREDUCE_WAIT_SPIN_US", "0");
  env.set("ARCREDUCE_BATCH_GAP_US", "0");
  env.set("ARCREDUCE_MIN_BUCKET_BYTES", "0");
  env.set("ARCREDUCE_BATCH_COMPRESSED", "1");
  Config c = Config::from_env();
  EXPECT_EQ(c.compressor, "topk");
  EXPECT_EQ(c.compress_ratio, 0.1);
  EXPECT_EQ(c.sketch_rank, 8);
  EXPECT_EQ(c.error_feedback, "ef14");
  EXPECT_EQ(c.ef_momentum, 0.5);
  EXPECT_EQ(c.warmup_steps, 3);
  EXPECT_EQ(c.min_compress_elements, 100);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_EQ(c.fusion_threshold, 0);
  EXPECT_EQ(c.cycle_time_ms, 2.5);
  EXPECT_EQ(c.cache_capacity, 0);
  EXPECT_EQ(c.timeline, "/tmp/t.json");
  EXPECT_EQ(c.stall_check_seconds, 5);
  EXPECT_EQ(c.stall_shutdown_seconds, 0);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.allreduce_algorithm, "ring");
  EXPECT_EQ(c.granularity, "row");
  EXPECT_EQ(c.ef_init, "zero");
  EXPECT_TRUE(c.check_consistency);
  EXPECT_EQ(c.oktopk_tau, 16);
  EXPECT_EQ(c.oktopk_tau_prime, 128);
  EXPECT_TRUE(c.oktopk_rebalance);
  EXPECT_EQ(c.powersgd_rank, 4);
  EXPECT_EQ(c.cuda_transport, "mpi");
  EXPECT_EQ(c.wait_mode, "yield");
  EXPECT_EQ(c.wait_max_sleep_us, 750);
  EXPECT_EQ(c.wait_spin_us, 0);
  EXPECT_EQ(c.batch_gap_us, 0);
  EXPECT_EQ(c.min_bucket_bytes, 0);
  EXPECT_EQ(c.batch_compressed, CompressedBatching::kOn);
}

TEST(Config, BatchCompressedTakesZeroOneAndAuto) {
  const std::pair<const char*, CompressedBatching> cases[] = {{"0", CompressedBatching::kOff},
                                                              {"1", CompressedBatching::kOn},
                                                              {"auto", CompressedBatching::kAuto}};
  for (const auto& [value, expected] : cases) {
    EnvGuard env;
    env.set("ARCREDUCE_BATCH_COMPRESSED", value);
    EXPECT_EQ(Config::from_env().batch_compressed, expected) << value;
  }
}

struct BadValue {
  const char* var;
  const char* value;
  const char* accepted;
};

class BadConfig : public ::testing::TestWithParam<BadValue> {};

TEST_P(BadConfig, NamesVariableValueAndWhatIsAccepted) {
  EnvGuard env;
  env.set(GetParam().var, GetParam().value);
  try {
    Config::from_env();
    FAIL() << "accepted " << GetParam().var << "=" << GetParam().value;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(GetParam().var));
    EXPECT_THAT(e.what(), HasSubstr(std::string("'") + GetParam().value + "'"));
    EXPECT_THAT(e.what(), HasSubstr(GetParam().accepted));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Values, BadConfig,
    ::testing::Values(BadValue{"ARCREDUCE_PRESET", "papr", "default or paper"},
                      BadValue{"ARCREDUCE_COMPRESSOR", "zip", "arctopk"},
                      BadValue{"ARCREDUCE_COMPRESS_RATIO", "0", "(0, 1]"},
                      BadValue{"ARCREDUCE_COMPRESS_RATIO", "1.5", "(0, 1]"},
                      BadValue{"ARCREDUCE_COMPRESS_RATIO", "abc", "number"},
                      BadValue{"ARCREDUCE_COMPRESS_RATIO", "nan", "number"},
                      BadValue{"ARCREDUCE_SKETCH_RANK", "0", ">= 1"},
                      BadValue{"ARCREDUCE_ERROR_FEEDBACK", "ef9", "ef21m"},
                      BadValue{"ARCREDUCE_EF_ETA", "2", "(0, 1]"},
                      BadValue{"ARCREDUCE_WARMUP_STEPS", "-1", ">= 0"},
                      BadValue{"ARCREDUCE_MIN_COMPRESS_ELEMENTS", "1e3", "integer"},
                      BadValue{"ARCREDUCE_SEED", "-4", ">= 0"},
                      BadValue{"ARCREDUCE_FUSION_THRESHOLD", "-1", ">= 0"},
                      BadValue{"ARCREDUCE_FUSION_THRESHOLD", "64MB", "integer"},
                      BadValue{"ARCREDUCE_CYCLE_TIME_MS", "0", "milliseconds"},
                      BadValue{"ARCREDUCE_CACHE_CAPACITY", "-5", "0 disables"},
                      BadValue{"ARCREDUCE_STALL_CHECK_SECONDS", "-1", "seconds"},
                      BadValue{"ARCREDUCE_STALL_SHUTDOWN_SECONDS", "soon", "number"},
                      BadValue{"ARCREDUCE_LOG_LEVEL", "loud", "warning"},
                      BadValue{"ARCREDUCE_ALLREDUCE_ALGORITHM", "tree", "ring"},
                      BadValue{"ARCREDUCE_GRANULARITY", "block", "element, row"},
                      BadValue{"ARCREDUCE_EF_INIT", "hot", "warm, zero"},
                      BadValue{"ARCREDUCE_OKTOPK_TAU", "0", ">= 1"},
                      BadValue{"ARCREDUCE_OKTOPK_TAU", "x", "integer"},
                      BadValue{"ARCREDUCE_OKTOPK_TAU_PRIME", "-3", ">= 1"},
                      BadValue{"ARCREDUCE_OKTOPK_REBALANCE", "yes", "0 or 1"},
                      BadValue{"ARCREDUCE_POWERSGD_RANK", "0", ">= 1"},
                      BadValue{"ARCREDUCE_POWERSGD_RANK", "2.5", "integer"},
                      BadValue{"ARCREDUCE_CHECK_CONSISTENCY", "yes", "0 or 1"},
                      BadValue{"ARCREDUCE_CUDA_TRANSPORT", "gloo", "auto, nccl, mpi"},
                      BadValue{"ARCREDUCE_CUDA_TRANSPORT", "NCCL", "auto, nccl, mpi"},
                      BadValue{"ARCREDUCE_WAIT_MODE", "spin", "sleep, yield, busy"},
                      BadValue{"ARCREDUCE_WAIT_MAX_SLEEP_US", "0", "[1, 100000]"},
                      BadValue{"ARCREDUCE_WAIT_MAX_SLEEP_US", "1ms", "integer"},
                      BadValue{"ARCREDUCE_WAIT_SPIN_US", "-1", "[0, 1000000]"},
                      BadValue{"ARCREDUCE_BATCH_GAP_US", "1000001", "[0, 1000000]"},
                      BadValue{"ARCREDUCE_BATCH_GAP_US", "soon", "integer"},
                      BadValue{"ARCREDUCE_MIN_BUCKET_BYTES", "-1", "[0, 1073741824]"},
                      BadValue{"ARCREDUCE_MIN_BUCKET_BYTES", "1MB", "integer"},
                      BadValue{"ARCREDUCE_BATCH_COMPRESSED", "yes", "0, 1 or auto"},
                      BadValue{"ARCREDUCE_FOO", "1", "ARCREDUCE_COMPRESSOR"}));

// "nccl" needs a build with NCCL: rejected at start-up otherwise, naming the variable.
TEST(Config, CudaTransportNcclNeedsABuildWithNccl) {
  EnvGuard env;
  env.set("ARCREDUCE_CUDA_TRANSPORT", "nccl");
  Config programmatic;
  programmatic.cuda_transport = "nccl";
  if (ARCREDUCE_NCCL) {
    EXPECT_EQ(Config::from_env().cuda_transport, "nccl");
    EXPECT_NO_THROW(programmatic.validate());
    return;
  }
  for (int from_env = 0; from_env < 2; ++from_env) {
    try {
      if (from_env) {
        Config::from_env();
      } else {
        programmatic.validate();
      }
      FAIL() << "a build without NCCL accepted ARCREDUCE_CUDA_TRANSPORT=nccl";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("ARCREDUCE_CUDA_TRANSPORT='nccl' is invalid"));
      EXPECT_THAT(e.what(), HasSubstr("auto or mpi (this build of arcreduce has no NCCL)"));
    }
  }
}

TEST(Config, CudaTransportIsAgreedAsWhatItMeansInTheBuild) {
  EXPECT_EQ(cuda_transport_family("auto", true), "nccl");
  EXPECT_EQ(cuda_transport_family("auto", false), "mpi");
  EXPECT_EQ(cuda_transport_family("nccl", false), "nccl");
  EXPECT_EQ(cuda_transport_family("nccl", true), "nccl");
  EXPECT_EQ(cuda_transport_family("mpi", true), "mpi");
  EXPECT_EQ(cuda_transport_family("mpi", false), "mpi");
  Config c;
  bool listed = false;
  for (const auto& kv : must_match_settings(c)) {
    if (kv.first != kEnvCudaTransport) continue;
    listed = true;
    EXPECT_EQ(kv.second, ARCREDUCE_NCCL ? "nccl" : "mpi");
  }
  EXPECT_TRUE(listed);
}

// Every row of the settings table (runtime/settings.inc), so that a new row is tested without a
// test of its own: its default, written as the row writes values, reads back as the default.
TEST(Settings, EveryRowReadsItsDefaultBack) {
  const Config defaults;
  for (const settings::Setting& s : settings::all()) {
    EnvGuard env;
    if (s.role == settings::Setting::kPreset) {
      env.set(s.name, "default");
      const Config c = Config::from_env();
      for (const settings::Setting& field : settings::all()) {
        if (field.role == settings::Setting::kField) {
          EXPECT_EQ(field.text(c), field.text(defaults)) << s.name << " " << field.name;
        }
      }
      continue;
    }
    const std::string text = s.text(defaults);
    env.set(s.name, text);
    const Config c = Config::from_env();
    EXPECT_EQ(s.text(c), text) << s.name;
    EXPECT_EQ(s.agreed(c), s.agreed(defaults)) << s.name;
  }
}

// Every text a row refuses (beyond each bound, not a number, not one of its choices) fails
// from_env() with a message naming the variable and quoting the text: the row's own variable,
// or, for a former name's value out of range, the variable that replaces it.
TEST(Settings, EveryRowRefusesWhatItDoesNotAccept) {
  for (const settings::Setting& s : settings::all()) {
    if (s.kind.type != settings::Kind::kPath) {
      EXPECT_FALSE(s.invalid_texts().empty()) << s.name;
    }
    for (const std::string& bad : s.invalid_texts()) {
      EnvGuard env;
      env.set(s.name, bad);
      try {
        Config::from_env();
        ADD_FAILURE() << "accepted " << s.name << "=" << bad;
      } catch (const Error& e) {
        const std::string quoted = "='" + bad + "' is invalid: expected ";
        const std::string renamed = s.alias_of ? s.alias_of : s.name;
        EXPECT_THAT(e.what(),
                    ::testing::AnyOf(HasSubstr(s.name + quoted), HasSubstr(renamed + quoted)));
      }
    }
  }
}

// The rows of the table are what the runtime's other readers expect: arcrun's flags are the
// rows that name one, the ranks compare the kEveryRank rows, and the choice lists that arcrun
// cannot take from ops/ (which needs MPI) are the names ops/ parses.
TEST(Settings, TheTableIsWhatItsReadersUse) {
  std::vector<std::string> every_rank;
  for (const settings::Setting& s : settings::all()) {
    if (s.role == settings::Setting::kField && s.agreement == settings::Agreement::kEveryRank) {
      every_rank.push_back(s.name);
    }
  }
  std::vector<std::string> compared;
  for (const auto& kv : must_match_settings(Config())) compared.push_back(kv.first);
  EXPECT_EQ(compared, every_rank);
  EXPECT_EQ(config_variables().size(), settings::all().size());
  EXPECT_EQ(settings::find(kEnvWaitMode)->choices(), wait_mode_names());
  for (const std::string& name : settings::find(kEnvAllreduceAlgorithm)->choices()) {
    EXPECT_EQ(allreduce_algorithm_name(parse_allreduce_algorithm(name)), name);
  }
  for (const std::string& name : settings::find(kEnvHierarchical)->choices()) {
    EXPECT_EQ(hierarchy_name(parse_hierarchy(name)), name);
  }
  for (const auto& [name, init] : kEfInitValues) {
    Config c;
    c.ef_init = name;
    EXPECT_EQ(ef_init_of(c), init) << name;
  }
  for (const auto& [name, transport] : kCudaTransportValues) {
    Config c;
    c.cuda_transport = name;
    EXPECT_EQ(cuda_transport_of(c), transport) << name;
  }
}

// Configuration errors reach every rank, whichever rank has them.
TEST(ConfigAgreement, OneBadRankFailsEveryRank) {
  LoopbackWorld world(3);
  std::vector<std::string> messages(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      auto comm = world.communicator(r);
      Config c;
      try {
        agree_on_config(*comm, r == 1 ? nullptr : &c, r == 1 ? "ARCREDUCE_SEED='x' is bad" : "");
      } catch (const Error& e) {
        messages[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(messages[r], HasSubstr("rank 1: ARCREDUCE_SEED='x' is bad")) << r;
  }
}

// Constructs a Runtime on every rank of a loopback world with that rank's config; returns each
// rank's construction error (empty where it succeeded).
std::vector<std::string> construction_errors(const std::vector<Config>& configs) {
  LoopbackWorld world(static_cast<int>(configs.size()));
  std::vector<std::string> messages(configs.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < configs.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        Runtime rt(configs[r], world.communicator(static_cast<int>(r)));
      } catch (const Error& e) {
        messages[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return messages;
}

TEST(ConfigAgreement, MustMatchSettingsDifferingFailEveryRank) {
  std::vector<Config> configs(4, testing::test_config());
  configs[2].fusion_threshold = 1024;
  const std::vector<std::string> messages = construction_errors(configs);
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(messages[r],
                HasSubstr("ARCREDUCE_FUSION_THRESHOLD must be the same on every rank"));
    EXPECT_THAT(messages[r], HasSubstr("rank 2 has '1024'"));
  }
}

TEST(ConfigAgreement, PowerSgdRankMustMatch) {
  std::vector<Config> configs(3, testing::test_config());
  configs[1].powersgd_rank = 2;
  const std::vector<std::string> messages = construction_errors(configs);
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(messages[r], HasSubstr("ARCREDUCE_POWERSGD_RANK must be the same on every rank"));
    EXPECT_THAT(messages[r], HasSubstr("rank 1 has '2'"));
  }
}

// A rank in NCCL's All-Reduce and one in MPI's would wait for each other forever: in a build
// with NCCL, "auto" (NCCL) and "mpi" differ; in one without, both mean MPI and agree.
TEST(ConfigAgreement, CudaTransportMustMeanTheSameOnEveryRank) {
  std::vector<Config> configs(3, testing::test_config());
  configs[2].cuda_transport = "mpi";
  const std::vector<std::string> messages = construction_errors(configs);
  for (int r = 0; r < 3; ++r) {
    if (ARCREDUCE_NCCL) {
      EXPECT_THAT(messages[r], HasSubstr("ARCREDUCE_CUDA_TRANSPORT must be the same on every rank: "
                                         "rank 0 has 'nccl', rank 2 has 'mpi'"));
    } else {
      EXPECT_EQ(messages[r], "") << r;
    }
  }
}

TEST(ConfigAgreement, InvalidProgrammaticConfigFailsEveryRank) {
  std::vector<Config> configs(2, testing::test_config());
  configs[0].compress_ratio = 0;
  const std::vector<std::string> messages = construction_errors(configs);
  for (int r = 0; r < 2; ++r) EXPECT_THAT(messages[r], HasSubstr("ARCREDUCE_COMPRESS_RATIO"));
}

}  // namespace
}  // namespace arcreduce
