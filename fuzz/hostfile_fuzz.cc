// Fuzz target: arcrun's host lists (-H) and hostfiles (launcher/hosts.h).
// Input: the first byte picks the parser (even: hostfile text, odd: -H list), the rest is its
// text. Contract: a parsed list is non-empty, every host has a valid, distinct name and a
// positive slot count, the total does not overflow; otherwise UsageError with a message that
// names the source (the file, or -H).
#include <set>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "launcher/hosts.h"
#include "launcher/launch_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arcreduce;
  using namespace arcreduce::launcher;
  if (size == 0) return 0;
  const bool hostfile = data[0] % 2 == 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const std::vector<Host> hosts =
        hostfile ? parse_hostfile_text(text, "hosts.txt") : parse_host_list(text);
    fuzz::check(!hosts.empty(), "an empty host list was accepted");
    std::set<std::string> names;
    long long total = 0;
    for (const Host& host : hosts) {
      fuzz::check(host.slots > 0, "host '" + host.name + "' has a slot count below 1");
      fuzz::check(names.insert(host.name).second, "host '" + host.name + "' listed twice");
      try {
        check_host_name(host.name, "fuzz");
      } catch (const UsageError&) {
        fuzz::check(false, "an invalid host name was accepted: '" + host.name + "'");
      }
      total += host.slots;
    }
    fuzz::check(total == total_slots(hosts), "total_slots() overflowed");
  } catch (const UsageError& e) {
    fuzz::check_message(e.what(), "the host parser");
    const std::string message = e.what();
    fuzz::check(message.find(hostfile ? "hosts.txt" : "-H") != std::string::npos,
                "a host error does not name its source: " + message);
  }
  return 0;
}
