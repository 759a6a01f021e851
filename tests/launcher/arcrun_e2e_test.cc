// End to end: the built arcrun starts print_env through this machine's mpirun; the tests read
// what every rank printed and arcrun's exit status. ARCRUN and PRINT_ENV are compile-time paths.
// The restart tests count a job's launches in $ARCRUN_ELASTIC_DIR (print_env --fail-launches).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// Runs arcrun with `args` and an environment of PATH, HOME and `env` ("NAME=VALUE"), in a
// process group of its own. When `signal_when` is not empty, sends `sig` to arcrun (to its
// process group with `to_group`, as a terminal or `kill -SIG -PGID` does) once its output
// contains that text.
Result arcrun(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
              const std::string& signal_when = "", int sig = SIGTERM, bool to_group = false) {
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
    setpgid(0, 0);
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
  bool signalled = false;
  for (ssize_t got; (got = read(fds[0], buffer, sizeof(buffer))) > 0;) {
    result.out.append(buffer, got);
    if (!signal_when.empty() && !signalled && result.out.find(signal_when) != std::string::npos) {
      kill(to_group ? -child : child, sig);
      signalled = true;
    }
  }
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

// A directory of the test's own, removed with what it holds at the end of the test.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/arcrun_e2e_XXXXXX";
    path_ = mkdtemp(name) ? name : "";
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

  // An executable shell script `name` in the directory.
  std::string script(const std::string& name, const std::string& body) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << "#!/bin/sh\n" << body;
    chmod(file.c_str(), 0755);
    return file;
  }

 private:
  std::string path_;
};

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The value of the first "rank 0: NAME=value" line.
std::string value_on_rank0(const std::string& out, const std::string& name) {
  const std::string key = "rank 0: " + name + "=";
  const size_t at = out.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return out.substr(begin, out.find('\n', begin) - begin);
}

TEST(ArcrunRestarts, AFailedJobIsLaunchedAgainInTheSameDirectoryUntilItSucceeds) {
  const Result r = arcrun({"-np", "2", "--restarts", "2", "--", PRINT_ENV, "--fail-launches", "1",
                           "--show", "ARCRUN_RESTART", "--show", "ARCRUN_ELASTIC_DIR"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("rank 0: launch=1\n"));
  EXPECT_THAT(r.out, HasSubstr("rank 0: launch=2\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("launch=3")));
  EXPECT_THAT(r.out, HasSubstr("rank 0: ARCRUN_RESTART=0\n"));
  EXPECT_THAT(r.out, HasSubstr("rank 0: ARCRUN_RESTART=1\n"));
  EXPECT_THAT(r.out, HasSubstr("rank 1: ARCRUN_RESTART=1\n"));
  EXPECT_EQ(count_of(r.out, "arcrun: "), 1u) << r.out;
  EXPECT_THAT(r.out, HasSubstr("arcrun: the job ended with status 3 (restart 1 of 2): starting it "
                               "again on this machine, 2 ranks\n"));
  // One directory that arcrun created, the same for both launches, removed after the success.
  const std::string dir = value_on_rank0(r.out, "ARCRUN_ELASTIC_DIR");
  EXPECT_THAT(dir, HasSubstr("/arcrun-elastic-"));
  EXPECT_EQ(count_of(r.out, "rank 0: ARCRUN_ELASTIC_DIR=" + dir + "\n"), 2u) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(ArcrunRestarts, AJobThatKeepsFailingEndsAfterTheRestartsWithItsStatus) {
  const Result r = arcrun({"-np", "2", "--restarts", "2", "--", PRINT_ENV, "--fail-launches", "3",
                           "--show", "ARCRUN_ELASTIC_DIR"});
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("rank 0: launch=3\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("launch=4")));
  EXPECT_THAT(r.out, HasSubstr("(restart 1 of 2)"));
  EXPECT_THAT(r.out, HasSubstr("(restart 2 of 2)"));
  EXPECT_THAT(r.out, Not(HasSubstr("(restart 3")));
  // The directory holds what the job wrote: kept, and named.
  const std::string dir = value_on_rank0(r.out, "ARCRUN_ELASTIC_DIR");
  EXPECT_THAT(r.out, HasSubstr("arcrun: the job failed 3 times (status 3 (x3)), on its first "
                               "launch and 2 restarts (--restarts 2): not starting it again; the "
                               "job's commits stay in " +
                               dir + " (--elastic-dir " + dir + " resumes from them)\n"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/launches"));
  std::filesystem::remove_all(dir);
}

TEST(ArcrunRestarts, NoRestartsByDefaultNorWithZeroAndTheCallersDirectoryIsUsed) {
  TempDir dir;
  for (const std::vector<std::string>& restarts :
       {std::vector<std::string>{}, std::vector<std::string>{"--restarts", "0"}}) {
    std::vector<std::string> args = {"-np", "2"};
    args.insert(args.end(), restarts.begin(), restarts.end());
    args.insert(args.end(), {PRINT_ENV, "--fail-launches", "5", "--show", "ARCRUN_RESTART"});
    const Result r = arcrun(args, {"ARCRUN_ELASTIC_DIR=" + dir.path()});
    EXPECT_EQ(r.status, 3) << r.out;
    EXPECT_THAT(r.out, Not(HasSubstr("arcrun: ")));
    EXPECT_THAT(r.out, Not(HasSubstr("ARCRUN_RESTART")));  // set only when restarts are enabled
  }
  EXPECT_EQ(std::filesystem::file_size(dir.path() + "/launches"), 2u);  // one launch each
}

TEST(ArcrunRestarts, ElasticDirIsTheCallersAndKept) {
  TempDir dir;
  const Result r = arcrun({"-np", "2", "--restarts", "1", "--elastic-dir", dir.path(), PRINT_ENV,
                           "--fail-launches", "1", "--show", "ARCRUN_ELASTIC_DIR"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "rank 0: ARCRUN_ELASTIC_DIR=" + dir.path() + "\n"), 2u) << r.out;
  EXPECT_EQ(std::filesystem::file_size(dir.path() + "/launches"), 2u);
}

TEST(ArcrunRestarts, TheHostsTheDiscoveryScriptListsBeforeEachLaunchAreUsed) {
  TempDir dir;
  // Two slots the first time, one slot afterwards (a host lost).
  const std::string script =
      dir.script("discover",
                 "if [ -e \"$0.seen\" ]; then echo localhost:1; else : > \"$0.seen\"; echo "
                 "' localhost:2 '; echo; fi\n");
  const std::vector<std::string> args = {"-np",
                                         "2",
                                         "--min-np",
                                         "1",
                                         "--restarts",
                                         "1",
                                         "--host-discovery-script",
                                         script,
                                         "--elastic-dir",
                                         dir.path(),
                                         PRINT_ENV,
                                         "--fail-launches",
                                         "1",
                                         "--show",
                                         "OMPI_COMM_WORLD_SIZE"};
  const Result r = arcrun(args);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("rank 0: OMPI_COMM_WORLD_SIZE=2\nrank 0: launch=1\n"));
  EXPECT_THAT(r.out, HasSubstr("rank 0: OMPI_COMM_WORLD_SIZE=1\nrank 0: launch=2\n"));
  EXPECT_THAT(r.out, HasSubstr("arcrun: the job ended with status 3 (restart 1 of 1): starting it "
                               "again on 1 host, 1 rank\n"));
  // --dry-run runs the script too, and shows the first launch's command.
  std::vector<std::string> dry = args;
  dry.insert(dry.begin(), "--dry-run");
  const Result d = arcrun(dry);
  ASSERT_EQ(d.status, 0) << d.out;
  EXPECT_THAT(d.out, HasSubstr(" -np 1 --host localhost:1 "));
  EXPECT_THAT(d.out, HasSubstr(" -x ARCRUN_ELASTIC_DIR=" + dir.path() + " -x ARCRUN_RESTART=0 "));
}

TEST(ArcrunRestarts, TooFewDiscoveredSlotsOrNoHostsAreOneLineErrors) {
  TempDir dir;
  const std::string one = dir.script("one", "echo localhost\n");
  Result r = arcrun({"-np", "2", "--host-discovery-script", one, PRINT_ENV});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out,
            "arcrun: --min-np 2 (-np, as --min-np is not given): the hosts of "
            "--host-discovery-script have 1 slot (localhost:1); not starting the job with fewer "
            "than 2 ranks\n");
  const std::string none = dir.script("none", "echo\n");
  r = arcrun({"-np", "1", "--restarts", "3", "--host-discovery-script", none, PRINT_ENV});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "arcrun: --host-discovery-script '" + none + "' printed no hosts\n");
}

// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');
  return !stat || paren == std::string::npos || text.substr(paren + 2, 1) == "Z";
}

TEST(ArcrunRestarts, ASignalToArcrunOrItsProcessGroupStopsTheJobWithoutARestart) {
  for (const bool to_group : {false, true}) {
    SCOPED_TRACE(to_group ? "SIGINT to the process group" : "SIGTERM to arcrun");
    const int sig = to_group ? SIGINT : SIGTERM;
    TempDir dir;
    const auto start = std::chrono::steady_clock::now();
    const Result r = arcrun({"-np", "2", "--restarts", "3", "--elastic-dir", dir.path(), PRINT_ENV,
                             "--fail-launches", "5", "--sleep", "60"},
                            {}, "rank 0: launch=1\n", sig, to_group);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_LT(seconds, 30.0) << r.out;
    EXPECT_THAT(r.out, Not(HasSubstr("launch=2")));
    EXPECT_THAT(r.out, Not(HasSubstr("(restart 1")));
    EXPECT_THAT(r.out, HasSubstr("arcrun: stopped by signal " + std::to_string(sig) +
                                 ": not restarting the job, which ended with "));
    // No rank is left behind (Open MPI leaves them when it gets the signal twice).
    for (const std::string rank : {"0", "1"}) {
      const std::string key = "rank " + rank + ": pid=";
      const size_t at = r.out.find(key);
      if (at == std::string::npos) continue;
      const pid_t rank_pid = std::atoi(r.out.c_str() + at + key.size());
      for (int i = 0; i < 50 && !ended(rank_pid); ++i) usleep(100 * 1000);
      EXPECT_TRUE(ended(rank_pid)) << "rank " << rank << " (pid " << rank_pid << ") still runs";
      if (!ended(rank_pid)) kill(rank_pid, SIGKILL);
    }
  }
}

}  // namespace
