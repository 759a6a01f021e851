#include "launcher/hosts.h"

#include <fstream>
#include <sstream>

#include "launcher/launch_options.h"
#include "launcher/numbers.h"

namespace arcreduce::launcher {
namespace {

// mpirun refuses more than this many slots per host long before it matters; the bound keeps
// sums of slots far from int overflow.
constexpr long long kMaxSlots = 1 << 20;

int parse_slots(const std::string& text, const std::string& where) {
  const auto slots = parse_integer(text);
  if (!slots || *slots < 1 || *slots > kMaxSlots) {
    throw UsageError(where + ": slots must be a positive integer, got '" + text + "'");
  }
  return static_cast<int>(*slots);
}

// Adds a host, summing the slots of a name seen before. The slots of all hosts together stay
// within kMaxSlots (as -np does), so neither a host's sum nor total_slots() can overflow int.
void add_host(std::vector<Host>* hosts, Host host, const std::string& where) {
  long long total = host.slots;
  for (const Host& known : *hosts) total += known.slots;
  if (total > kMaxSlots) {
    throw UsageError(where + ": more than " + std::to_string(kMaxSlots) + " slots in all");
  }
  for (Host& known : *hosts) {
    if (known.name == host.name) {
      known.slots += host.slots;
      return;
    }
  }
  hosts->push_back(std::move(host));
}

}  // namespace

void check_host_name(const std::string& name, const std::string& where) {
  if (name.empty()) throw UsageError(where + ": empty host name");
  const bool valid = name.size() <= 253 && name[0] != '-' &&
                     name.find_first_not_of(
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789.-_") == std::string::npos;
  if (!valid) {
    throw UsageError(where + ": invalid host name '" + name +
                     "' (letters, digits, '.', '-' and '_' only, not starting with '-')");
  }
}

std::string format_host_list(const std::vector<Host>& hosts) {
  std::string list;
  for (const Host& host : hosts) {
    list += (list.empty() ? "" : ",") + host.name + ":" + std::to_string(host.slots);
  }
  return list;
}

std::vector<Host> parse_host_list(const std::string& list) {
  std::vector<Host> hosts;
  std::stringstream items(list);
  std::string item;
  bool any = false;
  while (std::getline(items, item, ',')) {
    any = true;
    Host host;
    const size_t colon = item.find(':');
    host.name = item.substr(0, colon);
    check_host_name(host.name, "-H");
    if (colon != std::string::npos) host.slots = parse_slots(item.substr(colon + 1), "-H " + item);
    add_host(&hosts, std::move(host), "-H");
  }
  if (!any || list.back() == ',') throw UsageError("-H: empty host in '" + list + "'");
  return hosts;
}

std::vector<Host> parse_hostfile_text(const std::string& text, const std::string& file) {
  std::vector<Host> hosts;
  std::stringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string where = file + ":" + std::to_string(number);
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    Host host;
    if (!(words >> host.name)) continue;  // blank or comment-only line
    check_host_name(host.name, where);
    std::string word;
    bool have_slots = false;
    while (words >> word) {
      if (word.rfind("slots=", 0) != 0 || have_slots) {
        throw UsageError(where + ": expected 'host [slots=N]', got '" + word + "'");
      }
      host.slots = parse_slots(word.substr(6), where);
      have_slots = true;
    }
    add_host(&hosts, std::move(host), where);
  }
  if (hosts.empty()) throw UsageError(file + ": no hosts in hostfile");
  return hosts;
}

std::vector<Host> parse_discovered_hosts(const std::string& text, const std::string& where) {
  std::vector<Host> hosts;
  std::stringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string at = where + " line " + std::to_string(number);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;  // blank line
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    Host host;
    const size_t colon = line.find(':');
    host.name = line.substr(0, colon);
    check_host_name(host.name, at);
    if (colon != std::string::npos) host.slots = parse_slots(line.substr(colon + 1), at);
    add_host(&hosts, std::move(host), at);
  }
  if (hosts.empty()) throw UsageError(where + " printed no hosts");
  return hosts;
}

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read hostfile '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_hostfile_text(text.str(), path);
}

int total_slots(const std::vector<Host>& hosts) {
  int total = 0;
  for (const Host& host : hosts) total += host.slots;
  return total;
}

}  // namespace arcreduce::launcher
