// build_command: a table of options and contexts and the exact argv each must give.
#include "launcher/command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace arcreduce::launcher {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using Argv = std::vector<std::string>;

LaunchOptions job(int ranks) {
  LaunchOptions options;
  options.ranks = ranks;
  options.program = {"./train", "--epochs", "3"};
  return options;
}

LaunchContext machine(bool as_root = false, int cpus = 8) {
  LaunchContext context;
  context.as_root = as_root;
  context.local_cpus = cpus;
  context.mpirun_path = "/usr/bin/mpirun";
  return context;
}

struct Case {
  const char* name;
  LaunchOptions options;
  LaunchContext context;
  Argv argv;
};

std::vector<Case> cases() {
  std::vector<Case> table;
  table.push_back({"local_non_root",
                   job(2),
                   machine(),
                   {"/usr/bin/mpirun", "-np", "2", "--bind-to", "none", "--map-by", "slot",
                    "--use-hwthread-cpus", "./train", "--epochs", "3"}});
  table.push_back({"local_root",
                   job(2),
                   machine(/*as_root=*/true),
                   {"/usr/bin/mpirun", "-np", "2", "--bind-to", "none", "--map-by", "slot",
                    "--allow-run-as-root", "--use-hwthread-cpus", "./train", "--epochs", "3"}});
  table.push_back({"local_more_ranks_than_cpus",
                   job(3),
                   machine(false, 2),
                   {"/usr/bin/mpirun", "-np", "3", "--bind-to", "none", "--map-by", "slot",
                    "--oversubscribe", "--use-hwthread-cpus", "./train", "--epochs", "3"}});
  {
    LaunchOptions o = job(4);
    o.hosts = {{"node1", 2}, {"node2", 2}};
    table.push_back({"hosts",
                     o,
                     machine(false, 1),
                     {"/usr/bin/mpirun", "-np", "4", "--host", "node1:2,node2:2", "--bind-to",
                      "none", "--map-by", "slot", "./train", "--epochs", "3"}});
    o.ranks = 6;
    o.oversubscribe = true;
    table.push_back({"hosts_oversubscribed",
                     o,
                     machine(),
                     {"/usr/bin/mpirun", "-np", "6", "--host", "node1:2,node2:2", "--bind-to",
                      "none", "--map-by", "slot", "--oversubscribe", "./train", "--epochs", "3"}});
  }
  {
    LaunchOptions o = job(1);
    o.rsh_agent = "/opt/cluster/netns-rsh";
    o.ssh_port = "2222";
    o.network_interface = "veth0";
    o.hosts = {{"h1", 1}};
    table.push_back({"remote_start",
                     o,
                     machine(),
                     {"/usr/bin/mpirun",
                      "-np",
                      "1",
                      "--host",
                      "h1:1",
                      "--bind-to",
                      "none",
                      "--map-by",
                      "slot",
                      "--mca",
                      "plm_rsh_agent",
                      "/opt/cluster/netns-rsh",
                      "--mca",
                      "plm_rsh_args",
                      "-p 2222",
                      "--mca",
                      "btl_tcp_if_include",
                      "veth0",
                      "--mca",
                      "oob_tcp_if_include",
                      "veth0",
                      "./train",
                      "--epochs",
                      "3"}});
  }
  {
    // Environment forwarded by name, -x overriding it, flags overriding both; sorted by name.
    LaunchOptions o = job(2);
    o.exported = {{"FOO", "a b"}, {"PATH", std::nullopt}, {"ARCREDUCE_SEED", "5"}};
    o.flag_settings = {{"ARCREDUCE_SEED", "7"}, {"ARCREDUCE_COMPRESS_RATIO", "0.05"}};
    o.mpi_args = {"--mca", "btl", "self,tcp"};
    LaunchContext c = machine();
    c.environment = {"HOME=/root", "ARCREDUCE_SEED=1", "ARCREDUCE_LOG_LEVEL=debug",
                     "ARCREDUCE_TIMELINE=/tmp/t=1.json"};
    table.push_back({"variables",
                     o,
                     c,
                     {"/usr/bin/mpirun",
                      "-np",
                      "2",
                      "--bind-to",
                      "none",
                      "--map-by",
                      "slot",
                      "--use-hwthread-cpus",
                      "-x",
                      "ARCREDUCE_COMPRESS_RATIO=0.05",
                      "-x",
                      "ARCREDUCE_LOG_LEVEL",
                      "-x",
                      "ARCREDUCE_SEED=7",
                      "-x",
                      "ARCREDUCE_TIMELINE",
                      "-x",
                      "FOO=a b",
                      "-x",
                      "PATH",
                      "--mca",
                      "btl",
                      "self,tcp",
                      "./train",
                      "--epochs",
                      "3"}});
    c.flavor = MpiFlavor::kMpich;
    c.as_root = true;
    o.hosts = {{"a", 2}};
    o.network_interface = "ib0";
    table.push_back({"mpich",
                     o,
                     c,
                     {"/usr/bin/mpirun",
                      "-np",
                      "2",
                      "-hosts",
                      "a:2",
                      "-bind-to",
                      "none",
                      "-iface",
                      "ib0",
                      "-genv",
                      "ARCREDUCE_COMPRESS_RATIO",
                      "0.05",
                      "-genv",
                      "ARCREDUCE_SEED",
                      "7",
                      "-genv",
                      "FOO",
                      "a b",
                      "-genvlist",
                      "ARCREDUCE_LOG_LEVEL,ARCREDUCE_TIMELINE,PATH",
                      "--mca",
                      "btl",
                      "self,tcp",
                      "./train",
                      "--epochs",
                      "3"}});
  }
  return table;
}

TEST(BuildCommand, ExactArgv) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(build_command(c.options, c.context).argv, ElementsAreArray(c.argv));
  }
}

TEST(BuildCommand, RootSetsOpenMpiConfirmationOnlyForOpenMpiAsRoot) {
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(build_command(job(1), machine(true)).env,
            (Env{{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}}));
  EXPECT_TRUE(build_command(job(1), machine(false)).env.empty());
  LaunchContext mpich = machine(true);
  mpich.flavor = MpiFlavor::kMpich;
  EXPECT_TRUE(build_command(job(1), mpich).env.empty());
}

TEST(BuildCommand, MoreRanksThanHostSlotsIsAnError) {
  LaunchOptions o = job(5);
  o.hosts = {{"a", 2}, {"b", 2}};
  try {
    build_command(o, machine());
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "-np 5 is more than the 4 slots of the given hosts; add slots or --oversubscribe");
    EXPECT_EQ(e.exit_code(), 2);
  }
}

TEST(BuildCommand, MpichRejectsRemoteStartOptions) {
  LaunchContext mpich = machine();
  mpich.flavor = MpiFlavor::kMpich;
  LaunchOptions o = job(1);
  o.rsh_agent = "ssh";
  EXPECT_THROW(
      {
        try {
          build_command(o, mpich);
        } catch (const UsageError& e) {
          EXPECT_THAT(e.what(), HasSubstr("--rsh-agent is not supported with MPICH"));
          throw;
        }
      },
      UsageError);
  o.rsh_agent.clear();
  o.ssh_port = "22";
  EXPECT_THROW(build_command(o, mpich), UsageError);
}

TEST(BuildCommand, RestartVariables) {
  auto variables = [](const LaunchOptions& o, const LaunchContext& c) {
    Argv x;
    const Argv argv = build_command(o, c).argv;
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "-x") x.push_back(argv[i + 1]);
    }
    return x;
  };
  LaunchOptions o = job(2);
  LaunchContext c = machine();
  EXPECT_TRUE(variables(o, c).empty());
  // The caller's directory travels by name, whether or not arcrun restarts the job.
  c.environment = {"ARCRUN_ELASTIC_DIR=/shared/run", "ARCRUN_RESTART=7", "ARCRUN_OTHER=1"};
  EXPECT_THAT(variables(o, c), ElementsAreArray(Argv{"ARCRUN_ELASTIC_DIR"}));
  o.restarts = 3;
  o.restart = 2;
  EXPECT_THAT(variables(o, c), ElementsAreArray(Argv{"ARCRUN_ELASTIC_DIR", "ARCRUN_RESTART=2"}));
  o.elastic_dir = "/tmp/arcrun-elastic-x";
  EXPECT_THAT(variables(o, c), ElementsAreArray(Argv{"ARCRUN_ELASTIC_DIR=/tmp/arcrun-elastic-x",
                                                     "ARCRUN_RESTART=2"}));
  o.restarts = 0;
  EXPECT_THAT(variables(o, c), ElementsAreArray(Argv{"ARCRUN_ELASTIC_DIR=/tmp/arcrun-elastic-x"}));
  c.flavor = MpiFlavor::kMpich;
  o.restarts = 1;
  const Argv argv = build_command(o, c).argv;
  EXPECT_THAT(argv, ::testing::Contains("ARCRUN_RESTART"));
  EXPECT_THAT(argv, ::testing::Contains("/tmp/arcrun-elastic-x"));
}

TEST(FormatCommand, QuotesEveryWordThatNeedsIt) {
  Command command;
  command.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}};
  command.argv = {"mpirun", "-x", "A=b c", "it's", "$HOME;rm", "", "a:2,b.c/d"};
  EXPECT_EQ(format_command(command),
            "OMPI_ALLOW_RUN_AS_ROOT=1 mpirun -x 'A=b c' 'it'\\''s' '$HOME;rm' '' a:2,b.c/d");
}

}  // namespace
}  // namespace arcreduce::launcher
