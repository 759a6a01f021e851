// Configuration checks of arcreduce::init() under mpirun.
//
//   runtime_config_test [--setenv=RANK:VAR=VALUE]... [--programmatic=FIELD=VALUE]
//                       (--expect-ok | --expect-error [--expect-text=TEXT]...
//                        [--expect-bad-rank=R] [--retry])
//
// --setenv sets VAR on rank RANK ("all" for every rank) before init, so one rank can hold a bad
// or different value. --programmatic calls init(Config) with one field changed instead of
// init(). With --expect-error every rank must get arcreduce::Error from init() (no rank may
// succeed or hang), and the message must contain every --expect-text (case-insensitive);
// ranks other than --expect-bad-rank must also name that rank. --retry then removes the
// variables, calls init() again and expects a working runtime. MPI is initialised here, so the
// ranks can compare notes; each prints PASS/FAIL lines with its rank and exits non-zero on
// failure, and a watchdog aborts the job if init() hangs on any rank.
#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "tests/mpi/runtime_process.h"
#include "tests/mpi/runtime_test_util.h"

namespace {

int g_rank = -1;
int g_failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "[rank %d] FAIL: %s\n", g_rank, what.c_str());
    std::fflush(stderr);
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool starts_with(const char* s, const char* prefix, const char** rest) {
  const size_t n = std::strlen(prefix);
  if (std::strncmp(s, prefix, n) != 0) return false;
  *rest = s + n;
  return true;
}

void set_field(arcreduce::Config& c, const std::string& field, const std::string& v) {
  if (field == "compress_ratio") {
    c.compress_ratio = std::atof(v.c_str());
  } else if (field == "fusion_threshold") {
    c.fusion_threshold = std::atoll(v.c_str());
  } else if (field == "cycle_time_ms") {
    c.cycle_time_ms = std::atof(v.c_str());
  } else if (field == "compressor") {
    c.compressor = v;
  } else if (field == "log_level") {
    c.log_level = v;
  } else {
    std::fprintf(stderr, "[rank %d] FAIL: unknown --programmatic field %s\n", g_rank,
                 field.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

// A working runtime: one reduction with the right result.
void check_runtime_works(const std::string& name) {
  arcreduce_test::TestTensor t(arcreduce::DType::kFloat32, {6});
  arcreduce_test::fill_inputs(t, g_rank, 1);
  arcreduce::Status s = arcreduce::allreduce(name, t.view(), arcreduce_test::dense());
  check(s.ok(), name + ": " + arcreduce_test::describe(s));
  check(arcreduce_test::check_reduced(t, arcreduce::ReduceOp::kAverage,
                                      arcreduce_test::world_size(), 1)
            .empty(),
        name + ": wrong result");
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);

  bool expect_ok = false, expect_error = false, retry = false;
  int bad_rank = -1;
  std::vector<std::string> texts, my_vars;
  std::string programmatic;
  for (int i = 1; i < argc; ++i) {
    const char* rest = nullptr;
    if (std::strcmp(argv[i], "--expect-ok") == 0) {
      expect_ok = true;
    } else if (std::strcmp(argv[i], "--expect-error") == 0) {
      expect_error = true;
    } else if (std::strcmp(argv[i], "--retry") == 0) {
      retry = true;
    } else if (starts_with(argv[i], "--expect-text=", &rest)) {
      texts.push_back(rest);
    } else if (starts_with(argv[i], "--expect-bad-rank=", &rest)) {
      bad_rank = std::atoi(rest);
    } else if (starts_with(argv[i], "--programmatic=", &rest)) {
      programmatic = rest;
    } else if (starts_with(argv[i], "--setenv=", &rest)) {
      std::string spec = rest;
      const size_t colon = spec.find(':'), eq = spec.find('=');
      const std::string who = spec.substr(0, colon);
      const std::string var = spec.substr(colon + 1, eq - colon - 1);
      const std::string value = spec.substr(eq + 1);
      if (who == "all" || std::atoi(who.c_str()) == g_rank) {
        setenv(var.c_str(), value.c_str(), 1);
        my_vars.push_back(var);
      }
    } else {
      std::fprintf(stderr, "[rank %d] FAIL: unknown argument %s\n", g_rank, argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (expect_ok == expect_error) {
    std::fprintf(stderr, "[rank %d] FAIL: pass exactly one of --expect-ok/--expect-error\n",
                 g_rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  arcreduce_test::Watchdog watchdog(g_rank, std::chrono::seconds(30), [] {
    return "FAIL: watchdog: init() or the check after it did not return within 30 s; aborting";
  });

  std::string error;
  bool threw = false;
  try {
    if (programmatic.empty()) {
      arcreduce::init();
    } else {
      arcreduce::Config c = arcreduce::Config::from_env();
      const size_t eq = programmatic.find('=');
      set_field(c, programmatic.substr(0, eq), programmatic.substr(eq + 1));
      arcreduce::init(c);
    }
  } catch (const arcreduce::Error& e) {
    threw = true;
    error = e.what();
    std::fprintf(stderr, "[rank %d] init() threw arcreduce::Error: %s\n", g_rank, e.what());
  } catch (const std::exception& e) {
    threw = true;
    check(false, std::string("init() threw something other than arcreduce::Error: ") + e.what());
  }

  if (expect_ok) {
    check(!threw, "init() must succeed, but threw: " + error);
    if (!threw) {
      check(arcreduce::initialized(), "initialized() false after init()");
      check_runtime_works("config_ok");
      arcreduce::shutdown();
    }
  } else {
    check(threw, "init() must throw arcreduce::Error on every rank, but it succeeded here");
    if (!threw) arcreduce::shutdown();
    for (const auto& t : texts) {
      check(lower(error).find(lower(t)) != std::string::npos,
            "the error must mention '" + t + "': " + error);
    }
    if (bad_rank >= 0 && g_rank != bad_rank) {
      const std::regex re(
          "rank[^0-9]{0,12}([0-9]+[^0-9a-z]{1,3}){0,8}" + std::to_string(bad_rank) + "([^0-9]|$)",
          std::regex::icase);
      check(std::regex_search(error, re),
            "the error on a healthy rank must name the failing rank " + std::to_string(bad_rank) +
                ": " + error);
    }
    if (threw) {
      check(!arcreduce::initialized(), "initialized() must be false after a failed init()");
    }
    if (retry) {
      for (const auto& v : my_vars) unsetenv(v.c_str());
      try {
        arcreduce::init();
        check_runtime_works("config_retry");
        arcreduce::shutdown();
      } catch (const std::exception& e) {
        check(false, std::string("init() after fixing the environment threw: ") + e.what());
      }
    }
  }

  return arcreduce_test::finish(watchdog, g_rank, g_failures);
}
