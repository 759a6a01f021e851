// Host lists and hostfiles.
#include "launcher/hosts.h"

#include <gtest/gtest.h>

#include "launcher/launch_options.h"

namespace arcreduce::launcher {
namespace {

std::string error_of(void (*parse)(const std::string&), const std::string& text) {
  try {
    parse(text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

void host_list(const std::string& text) {
  parse_host_list(text);
}
void hostfile(const std::string& text) {
  parse_hostfile_text(text, "hosts");
}

TEST(Hosts, ListWithAndWithoutSlots) {
  const auto hosts = parse_host_list("node-1.example:4,10.0.0.2,node_3:1,node-1.example:2");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node-1.example");
  EXPECT_EQ(hosts[0].slots, 6);  // named twice: slots add up
  EXPECT_EQ(hosts[1].name, "10.0.0.2");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(total_slots(hosts), 8);
}

TEST(Hosts, Hostfile) {
  const auto hosts = parse_hostfile_text("# c\n\na slots=2\n\tb   slots=3 # x\nc\n", "f");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].slots, 3);
  EXPECT_EQ(hosts[2].slots, 1);
}

TEST(Hosts, ErrorMessages) {
  EXPECT_EQ(error_of(host_list, "a:0"), "-H a:0: slots must be a positive integer, got '0'");
  EXPECT_EQ(error_of(host_list, "a:"), "-H a:: slots must be a positive integer, got ''");
  EXPECT_EQ(error_of(host_list, "a,"), "-H: empty host in 'a,'");
  EXPECT_EQ(error_of(host_list, ""), "-H: empty host in ''");
  EXPECT_EQ(error_of(host_list, ",a"), "-H: empty host name");
  EXPECT_EQ(error_of(host_list, "-a"),
            "-H: invalid host name '-a' (letters, digits, '.', '-' and '_' only, not starting "
            "with '-')");
  EXPECT_EQ(error_of(host_list, "$(reboot)"),
            "-H: invalid host name '$(reboot)' (letters, digits, '.', '-' and '_' only, not "
            "starting with '-')");
  EXPECT_EQ(error_of(hostfile, "a\nb slots=2 slots=3\n"),
            "hosts:2: expected 'host [slots=N]', got 'slots=3'");
  EXPECT_EQ(error_of(hostfile, "a\n\nb;c\n"),
            "hosts:3: invalid host name 'b;c' (letters, digits, '.', '-' and '_' only, not "
            "starting with '-')");
  EXPECT_EQ(error_of(hostfile, "a slots=two\n"),
            "hosts:1: slots must be a positive integer, got 'two'");
  EXPECT_EQ(error_of(hostfile, "\n# only\n"), "hosts: no hosts in hostfile");
}

void discovered(const std::string& text) {
  parse_discovered_hosts(text, "--host-discovery-script 'd'");
}

TEST(Hosts, DiscoveryScriptOutput) {
  const auto hosts =
      parse_discovered_hosts("node1:4\n\n  node2 \r\nnode1:2\n10.0.0.3:1\n", "script");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 6);
  EXPECT_EQ(hosts[1].name, "node2");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(hosts[2].name, "10.0.0.3");
  EXPECT_EQ(error_of(discovered, "\n \n"), "--host-discovery-script 'd' printed no hosts");
  EXPECT_EQ(error_of(discovered, ""), "--host-discovery-script 'd' printed no hosts");
  EXPECT_EQ(error_of(discovered, "a:1\nb:0\n"),
            "--host-discovery-script 'd' line 2: slots must be a positive integer, got '0'");
  EXPECT_EQ(error_of(discovered, "a b:2\n"),
            "--host-discovery-script 'd' line 1: invalid host name 'a b' (letters, digits, '.', "
            "'-' and '_' only, not starting with '-')");
  EXPECT_EQ(error_of(discovered, "a slots=2\n"),
            "--host-discovery-script 'd' line 1: invalid host name 'a slots=2' (letters, digits, "
            "'.', '-' and '_' only, not starting with '-')");
}

}  // namespace
}  // namespace arcreduce::launcher
