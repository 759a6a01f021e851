// End to end: the built arcrun starts print_env through this machine's mpirun; the tests read
// what every rank printed and arcrun's exit status. ARCRUN and PRINT_ENV are compile-time paths.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int status = -1;  // exit code
  std::string out;  // stdout and stderr together
};

// Runs arcrun with `args` and an environment of PATH, HOME and `env` ("NAME=VALUE").
Result arcrun(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::vector<std::string> words = {ARCRUN};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<std::string> environment = {std::string("PATH=") + getenv("PATH"), "HOME=/tmp",
                                          // containers without cross-memory attach
                                          "OMPI_MCA_btl_vader_single_copy_mechanism=none"};
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> argv, envp;
  for (auto& w : words) argv.push_back(w.data());
  for (auto& e : environment) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execve(argv[0], argv.data(), envp.data());
    _exit(126);
  }
  close(fds[1]);
  Result result;
  char buffer[4096];
  for (ssize_t got; (got = read(fds[0], buffer, sizeof(buffer))) > 0;)
    result.out.append(buffer, got);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

TEST(ArcrunEndToEnd, EveryRankGetsForwardedAndFlagVariablesFlagsWinning) {
  const Result r = arcrun(
      {"-np", "2", "--seed", "7", "--fusion-threshold-mb", "1", "--timeline", "/tmp/a b;c.json",
       "-x", "EXTRA=x y", "--", PRINT_ENV, "--show", "EXTRA", "a b", "$HOME", "*"},
      {"ARCREDUCE_SEED=5", "ARCREDUCE_LOG_LEVEL=debug"});
  ASSERT_EQ(r.status, 0) << r.out;
  for (const std::string rank : {"rank 0: ", "rank 1: "}) {
    EXPECT_THAT(r.out, HasSubstr(rank + "ARCREDUCE_SEED=7\n"));
    EXPECT_THAT(r.out, HasSubstr(rank + "ARCREDUCE_LOG_LEVEL=debug\n"));
    EXPECT_THAT(r.out, HasSubstr(rank + "ARCREDUCE_FUSION_THRESHOLD=1048576\n"));
    EXPECT_THAT(r.out, HasSubstr(rank + "ARCREDUCE_TIMELINE=/tmp/a b;c.json\n"));
    EXPECT_THAT(r.out, HasSubstr(rank + "EXTRA=x y\n"));
    EXPECT_THAT(r.out, HasSubstr(rank + "arg=a b\n" + rank + "arg=$HOME\n" + rank + "arg=*\n"));
  }
  EXPECT_THAT(r.out, Not(HasSubstr("ARCREDUCE_SEED=5")));
}

TEST(ArcrunEndToEnd, RankExitCodeBecomesArcrunsExitCode) {
  const Result r = arcrun({"-np", "2", PRINT_ENV, "--exit-on", "1", "3"});
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_EQ(r.status, 3) << r.out;  // Open MPI reports the first failing rank's code
}

TEST(ArcrunEndToEnd, DryRunPrintsTheCommandAndRunsNothing) {
  const Result r =
      arcrun({"-np", "2", "--dry-run", "--compress-ratio", "0.05", "-x", "A=b c", PRINT_ENV, "x y"},
             {"ARCREDUCE_SEED=5"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(" -np 2 --bind-to none --map-by slot "));
  EXPECT_THAT(r.out, HasSubstr(" -x 'A=b c' -x ARCREDUCE_COMPRESS_RATIO=0.05 -x ARCREDUCE_SEED " +
                               std::string(PRINT_ENV) + " 'x y'\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("rank 0")));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
}

TEST(ArcrunEndToEnd, BadInputIsOneLineAndExitCode2) {
  Result r = arcrun({"-np", "2", "--compress-ratio", "2", PRINT_ENV});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out,
            "arcrun: --compress-ratio '2' is invalid (ARCREDUCE_COMPRESS_RATIO): expected a "
            "fraction in (0, 1], e.g. 0.01\n");
  r = arcrun({"-np", "2", "--mpirun", "/nonexistent/mpirun", PRINT_ENV});
  EXPECT_EQ(r.status, 127);
  EXPECT_THAT(r.out, HasSubstr("arcrun: mpirun not found"));
}

}  // namespace
