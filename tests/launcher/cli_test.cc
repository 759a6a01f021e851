// parse_command_line and split_words: what each command line becomes, and every error message.
#include "launcher/cli.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace arcreduce::launcher {
namespace {

using ::testing::ElementsAre;
using Args = std::vector<std::string>;

// A hostfile in the test's temporary directory, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/arcrun_hostfile_XXXXXX";
    const int fd = mkstemp(name);
    close(fd);
    path_ = name;
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ParseCommandLine, ProgramStartsAtFirstNonOptionOrAfterDoubleDash) {
  LaunchOptions o = parse_command_line({"-np", "4", "./train", "--np", "9"}).options;
  EXPECT_EQ(o.ranks, 4);
  EXPECT_THAT(o.program, ElementsAre("./train", "--np", "9"));
  o = parse_command_line({"--np=2", "--mpirun", "--odd", "--", "prog", "-x"}).options;
  EXPECT_EQ(o.ranks, 2);
  EXPECT_EQ(o.mpirun, "--odd");
  EXPECT_THAT(o.program, ElementsAre("prog", "-x"));
}

TEST(ParseCommandLine, EveryOption) {
  const CommandLine line = parse_command_line({"-n",
                                               "3",
                                               "-H",
                                               "a:2,b",
                                               "--oversubscribe",
                                               "-x",
                                               "FOO=a b",
                                               "-x",
                                               "PATH",
                                               "--mpi-args",
                                               "--mca btl 'self,tcp'",
                                               "--rsh-agent",
                                               "my agent",
                                               "--ssh-port",
                                               "0022",
                                               "--network-interface",
                                               "eth0",
                                               "--dry-run",
                                               "--verbose",
                                               "--mpi-flavor",
                                               "mpich",
                                               "--seed",
                                               "9",
                                               "--fusion-threshold-mb",
                                               "2",
                                               "prog"});
  const LaunchOptions& o = line.options;
  EXPECT_TRUE(line.help.empty());
  ASSERT_EQ(o.hosts.size(), 2u);
  EXPECT_EQ(o.hosts[0].name, "a");
  EXPECT_EQ(o.hosts[0].slots, 2);
  EXPECT_EQ(o.hosts[1].slots, 1);
  EXPECT_TRUE(o.oversubscribe && o.dry_run && o.verbose);
  ASSERT_EQ(o.exported.size(), 2u);
  EXPECT_EQ(o.exported[0].value, std::optional<std::string>("a b"));
  EXPECT_EQ(o.exported[1].value, std::nullopt);
  EXPECT_THAT(o.mpi_args, ElementsAre("--mca", "btl", "self,tcp"));
  EXPECT_EQ(o.rsh_agent, "my agent");
  EXPECT_EQ(o.ssh_port, "22");
  EXPECT_EQ(o.network_interface, "eth0");
  EXPECT_EQ(o.flavor, MpiFlavor::kMpich);
  ASSERT_EQ(o.flag_settings.size(), 2u);
  EXPECT_EQ(o.flag_settings[0].name, "ARCREDUCE_SEED");
  EXPECT_EQ(o.flag_settings[1].name, "ARCREDUCE_FUSION_THRESHOLD");
  EXPECT_EQ(o.flag_settings[1].value, std::optional<std::string>("2097152"));
}

TEST(ParseCommandLine, RestartOptions) {
  LaunchOptions o = parse_command_line({"-np", "4", "p"}).options;
  EXPECT_EQ(o.restarts, 0);
  EXPECT_TRUE(o.elastic_dir.empty() && o.discovery_script.empty());
  EXPECT_FALSE(o.min_ranks || o.max_ranks);
  o = parse_command_line({"-np", "4", "--restarts", "3", "--elastic-dir", "/shared/run 1",
                          "--host-discovery-script", "./discover", "--min-np", "2", "--max-np", "8",
                          "p"})
          .options;
  EXPECT_EQ(o.restarts, 3);
  EXPECT_EQ(o.elastic_dir, "/shared/run 1");
  EXPECT_EQ(o.discovery_script, "./discover");
  EXPECT_EQ(o.min_ranks, std::optional<int>(2));
  EXPECT_EQ(o.max_ranks, std::optional<int>(8));
  EXPECT_TRUE(o.hosts.empty());
  o = parse_command_line({"-np", "4", "--host-discovery-script", "d", "--min-np", "4", "--max-np",
                          "4", "--restarts", "0", "p"})
          .options;
  EXPECT_EQ(o.min_ranks, std::optional<int>(4));
  // The caller's directory by name, and -x ARCRUN_RESTART without restarts, are accepted.
  o = parse_command_line({"-np", "1", "--restarts", "1", "-x", "ARCRUN_ELASTIC_DIR=/d", "p"})
          .options;
  EXPECT_TRUE(o.elastic_dir.empty());
  EXPECT_NO_THROW(parse_command_line({"-np", "1", "-x", "ARCRUN_RESTART=2", "p"}));
}

TEST(ParseCommandLine, Hostfile) {
  TempFile file("# cluster\nnode1 slots=2\n\n  node2   # one slot\n");
  const LaunchOptions o = parse_command_line({"-np", "3", "--hostfile", file.path(), "p"}).options;
  ASSERT_EQ(o.hosts.size(), 2u);
  EXPECT_EQ(o.hosts[1].name, "node2");
  EXPECT_EQ(o.hosts[1].slots, 1);
}

TEST(ParseCommandLine, Help) {
  EXPECT_THAT(parse_command_line({"--help"}).help, ::testing::HasSubstr("--compress-ratio"));
}

std::string error_of(const Args& args) {
  try {
    parse_command_line(args);
  } catch (const UsageError& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  return "(no error)";
}

TEST(ParseCommandLine, ErrorMessages) {
  TempFile bad("a slots=2\n\nb slots=0\n");
  TempFile junk("a slots=2 max_slots=4\n");
  TempFile empty("# nothing\n");
  const std::vector<std::pair<Args, std::string>> table = {
      {{"-np", "2", "--bogus", "p"},
       "The following argument was not expected: --bogus (try arcrun --help)"},
      {{"p"}, "--np is required (try arcrun --help)"},
      {{"-np", "2"}, "no program given (usage: arcrun -np N [options] [--] program [args...])"},
      {{"-np", "2", "--", "-p"}, "program '-p' is not a program name"},
      {{"-np", "0", "p"}, "-np '0' is invalid: expected a positive integer"},
      {{"-np", "2x", "p"}, "-np '2x' is invalid: expected a positive integer"},
      {{"-np", "2", "-H", "a", "--hostfile", bad.path(), "p"},
       "-H and --hostfile exclude each other; give one"},
      {{"-np", "2", "--hostfile", bad.path(), "p"},
       bad.path() + ":3: slots must be a positive integer, got '0'"},
      {{"-np", "2", "--hostfile", junk.path(), "p"},
       junk.path() + ":1: expected 'host [slots=N]', got 'max_slots=4'"},
      {{"-np", "2", "--hostfile", empty.path(), "p"}, empty.path() + ": no hosts in hostfile"},
      {{"-np", "2", "--hostfile", "/nonexistent/h", "p"}, "cannot read hostfile '/nonexistent/h'"},
      {{"-np", "2", "-H", "a b", "p"},
       "-H: invalid host name 'a b' (letters, digits, '.', '-' and '_' only, not starting with "
       "'-')"},
      {{"-np", "2", "-x", "A-B=1", "p"}, "-x 'A-B=1' is invalid: expected NAME or NAME=VALUE"},
      {{"-np", "2", "--mpi-args", "'a", "p"}, "--mpi-args: unterminated ' in: 'a"},
      {{"-np", "2", "--ssh-port", "ssh", "p"}, "--ssh-port 'ssh' is invalid: expected 1..65535"},
      {{"-np", "2", "--network-interface", "eth0;x", "p"},
       "--network-interface 'eth0;x' is invalid: expected interface names or CIDR ranges, "
       "comma-separated"},
      {{"-np", "2", "--mpi-flavor", "lam", "p"},
       "--mpi-flavor 'lam' is invalid: expected openmpi or mpich"},
      {{"-np", "2", "--restarts", "-1", "p"},
       "--restarts '-1' is invalid: expected an integer in 0..10000"},
      {{"-np", "2", "--restarts", "two", "p"},
       "--restarts 'two' is invalid: expected an integer in 0..10000"},
      {{"-np", "2", "--restarts", "10001", "p"},
       "--restarts '10001' is invalid: expected an integer in 0..10000"},
      {{"-np", "2", "--restarts", "1", "-x", "ARCRUN_RESTART=5", "p"},
       "-x ARCRUN_RESTART is arcrun's own with --restarts: it counts the launches"},
      {{"-np", "2", "--elastic-dir", "", "p"},
       "--elastic-dir '' is invalid: expected a directory path"},
      {{"-np", "2", "--elastic-dir", "/a", "-x", "ARCRUN_ELASTIC_DIR=/b", "p"},
       "--elastic-dir and -x ARCRUN_ELASTIC_DIR both name the directory; give one"},
      {{"-np", "2", "--elastic-dir", "/a", "-x", "ARCRUN_ELASTIC_DIR", "p"},
       "--elastic-dir and -x ARCRUN_ELASTIC_DIR both name the directory; give one"},
      {{"-np", "2", "--host-discovery-script", "", "p"},
       "--host-discovery-script '' is invalid: expected an executable"},
      {{"-np", "2", "-H", "a:2", "--host-discovery-script", "d", "p"},
       "--host-discovery-script and -H/--hostfile exclude each other; give one"},
      {{"-np", "4", "--min-np", "2", "p"},
       "--min-np needs --host-discovery-script: without one, every launch runs -np ranks on the "
       "same hosts"},
      {{"-np", "4", "--max-np", "8", "--restarts", "2", "p"},
       "--max-np needs --host-discovery-script: without one, every launch runs -np ranks on the "
       "same hosts"},
      {{"-np", "4", "--host-discovery-script", "d", "--min-np", "0", "p"},
       "--min-np '0' is invalid: expected a positive integer"},
      {{"-np", "4", "--host-discovery-script", "d", "--max-np", "4x", "p"},
       "--max-np '4x' is invalid: expected a positive integer"},
      {{"-np", "4", "--host-discovery-script", "d", "--min-np", "6", "--max-np", "5", "p"},
       "--min-np 6 is more than --max-np 5"},
      {{"-np", "4", "--host-discovery-script", "d", "--min-np", "6", "p"},
       "--min-np 6 is more than -np 4"},
      {{"-np", "4", "--host-discovery-script", "d", "--max-np", "2", "p"},
       "--max-np 2 is less than -np 4"},
      {{"-np", "2", "--compress-ratio", "1.5", "p"},
       "--compress-ratio '1.5' is invalid (ARCREDUCE_COMPRESS_RATIO): expected a fraction in (0, "
       "1], e.g. 0.01"},
  };
  for (const auto& [args, message] : table) {
    SCOPED_TRACE(::testing::PrintToString(args));
    EXPECT_EQ(error_of(args), message);
  }
}

TEST(SplitWords, QuotesAndEscapes) {
  EXPECT_THAT(split_words("  --mca btl_tcp_if_include eth0 "),
              ElementsAre("--mca", "btl_tcp_if_include", "eth0"));
  EXPECT_THAT(split_words(R"(a 'b c' "d \"e\" \\" f\ g '' x'y'z)"),
              ElementsAre("a", "b c", "d \"e\" \\", "f g", "", "xyz"));
  EXPECT_TRUE(split_words(" \t").empty());
  EXPECT_THROW(split_words("\"open"), UsageError);
  EXPECT_THROW(split_words("end\\"), UsageError);
}

}  // namespace
}  // namespace arcreduce::launcher
