// Restarts (launcher/elastic.h): placement on discovered hosts, the elastic directory decision,
// the messages, and the host discovery script run as a process.
#include "launcher/elastic.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace arcreduce::launcher {
namespace {

using ::testing::HasSubstr;

LaunchOptions discovery_job(int ranks) {
  LaunchOptions options;
  options.ranks = ranks;
  options.program = {"./train"};
  options.discovery_script = "./discover";
  return options;
}

template <typename F>
std::string error_from(F&& call) {
  try {
    call();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// A directory of the test's own for scripts, removed at the end of the test.
class ScriptDir {
 public:
  ScriptDir() {
    char name[] = "/tmp/arcrun_elastic_XXXXXX";
    path_ = mkdtemp(name) ? name : "";
  }
  ~ScriptDir() { std::filesystem::remove_all(path_); }
  std::string script(const std::string& name, const std::string& body, bool executable = true) {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << "#!/bin/sh\n" << body;
    chmod(file.c_str(), executable ? 0755 : 0644);
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Elastic, DescribeStatus) {
  EXPECT_EQ(describe_status(3 << 8), "status 3");
  EXPECT_EQ(describe_status(0), "status 0");
  EXPECT_EQ(describe_status(9), "signal 9");
}

TEST(Elastic, PlacementTakesTheDiscoveredSlotsWithinMinAndMax) {
  const std::vector<Host> hosts = {{"a", 2}, {"b", 4}};
  LaunchOptions o = discovery_job(4);
  o.restart = 2;
  const LaunchOptions launch = place_on_hosts(o, hosts);
  EXPECT_EQ(launch.ranks, 4);  // --max-np defaults to -np
  EXPECT_EQ(launch.restart, 2);
  ASSERT_EQ(launch.hosts.size(), 2u);
  EXPECT_EQ(launch.hosts[1].name, "b");
  o.max_ranks = 8;
  EXPECT_EQ(place_on_hosts(o, hosts).ranks, 6);  // every slot, up to --max-np
  o.min_ranks = 2;
  EXPECT_EQ(place_on_hosts(o, {{"a", 2}}).ranks, 2);
  EXPECT_EQ(error_from([&] {
              place_on_hosts(o, {{"a", 1}});
            }),
            "--min-np 2: the hosts of --host-discovery-script have 1 slot (a:1); not starting the "
            "job with fewer than 2 ranks");
  EXPECT_EQ(error_from([&] {
              place_on_hosts(discovery_job(4), {{"a", 1}, {"b", 2}});
            }),
            "--min-np 4 (-np, as --min-np is not given): the hosts of --host-discovery-script "
            "have 3 slots (a:1,b:2); not starting the job with fewer than 4 ranks");
}

TEST(Elastic, ArcrunCreatesTheDirectoryOnlyWhenRestartingAndNoneIsNamed) {
  LaunchOptions o = discovery_job(2);
  EXPECT_FALSE(needs_elastic_dir(o, {}));  // no restarts
  o.restarts = 1;
  EXPECT_TRUE(needs_elastic_dir(o, {"HOME=/root"}));
  EXPECT_TRUE(needs_elastic_dir(o, {"ARCRUN_ELASTIC_DIR="}));  // set but empty
  EXPECT_FALSE(needs_elastic_dir(o, {"ARCRUN_ELASTIC_DIR=/shared/a"}));
  LaunchOptions exported = o;
  exported.exported = {{"ARCRUN_ELASTIC_DIR", std::string("/shared/b")}};
  EXPECT_FALSE(needs_elastic_dir(exported, {}));
  o.elastic_dir = "/shared/c";
  EXPECT_FALSE(needs_elastic_dir(o, {}));
}

TEST(Elastic, MakeElasticDirCreatesAnEmptyDirectory) {
  const std::string dir = make_elastic_dir();
  EXPECT_THAT(dir, HasSubstr("/arcrun-elastic-"));
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove(dir);
}

TEST(Elastic, Messages) {
  LaunchOptions launch = discovery_job(3);
  launch.restarts = 2;
  launch.restart = 1;
  EXPECT_EQ(restart_message(75 << 8, launch),
            "the job ended with status 75 (restart 1 of 2): starting it again on this machine, 3 "
            "ranks");
  launch.hosts = {{"a", 2}, {"b", 1}};
  launch.ranks = 1;
  EXPECT_EQ(restart_message(9, launch),
            "the job ended with signal 9 (restart 1 of 2): starting it again on 2 hosts, 1 rank");
  EXPECT_EQ(give_up_message({3 << 8, 3 << 8, 9}, 2),
            "the job failed 3 times (status 3 (x2), signal 9), on its first launch and 2 restarts "
            "(--restarts 2): not starting it again");
  EXPECT_EQ(give_up_message({1 << 8, 75 << 8}, 1),
            "the job failed 2 times (status 1, status 75), on its first launch and 1 restart "
            "(--restarts 1): not starting it again");
}

TEST(Elastic, DiscoveryScriptIsRunAndItsHostsRead) {
  ScriptDir dir;
  const std::string good = dir.script("good", "echo node1:2\necho node2\n");
  const auto hosts = discover_hosts(good, "/usr/bin:/bin", 10000);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].slots, 1);
  // A name without '/' is looked up in the path, as a shell would.
  EXPECT_EQ(discover_hosts("good", dir.path(), 10000).size(), 2u);
}

TEST(Elastic, DiscoveryScriptFailuresNameTheFlag) {
  ScriptDir dir;
  const std::string failing = dir.script("failing", "echo node1\nexit 4\n");
  EXPECT_EQ(error_from([&] { discover_hosts(failing, "", 10000); }),
            "--host-discovery-script '" + failing + "' ended with status 4 (expected 0)");
  const std::string empty = dir.script("empty", "true\n");
  EXPECT_EQ(error_from([&] { discover_hosts(empty, "", 10000); }),
            "--host-discovery-script '" + empty + "' printed no hosts");
  const std::string bad = dir.script("bad", "echo 'node1;reboot'\n");
  EXPECT_THAT(error_from([&] { discover_hosts(bad, "", 10000); }),
              HasSubstr("--host-discovery-script '" + bad + "' line 1: invalid host name"));
  const std::string plain = dir.script("plain", "echo node1\n", /*executable=*/false);
  EXPECT_EQ(
      error_from([&] { discover_hosts(plain, "", 10000); }),
      "--host-discovery-script '" + plain + "' cannot be run: no executable file of that name");
  EXPECT_EQ(error_from([] { discover_hosts("/nonexistent/discover", "", 10000); }),
            "--host-discovery-script '/nonexistent/discover' cannot be run: no executable file "
            "of that name");
  const std::string interpreter = dir.path() + "/interpreter";
  std::ofstream(interpreter) << "#!/nonexistent/shell\necho node1\n";
  chmod(interpreter.c_str(), 0755);
  EXPECT_EQ(
      error_from([&] { discover_hosts(interpreter, "", 10000); }),
      "--host-discovery-script '" + interpreter + "' cannot be run: No such file or directory");
}

TEST(Elastic, ADiscoveryScriptThatRunsTooLongIsKilled) {
  ScriptDir dir;
  const std::string slow = dir.script("slow", "echo node1\nexec sleep 30\n");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_from([&] { discover_hosts(slow, "", 300); }),
            "--host-discovery-script '" + slow + "' did not finish within 0.3 s (it was killed)");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
}

}  // namespace
}  // namespace arcreduce::launcher
