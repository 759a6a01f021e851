// Hosts and slots of a multi-host job, from `-H host1:slots,host2:slots` or from a hostfile with
// lines `host [slots=N]`. Every function throws UsageError with a one-line message on bad input.
#pragma once

#include <string>
#include <vector>

namespace arcreduce::launcher {

struct Host {
  std::string name;
  int slots = 1;  // ranks the host takes; a host given without a count takes one
};

// "a:2,b:4,c" -> {a,2},{b,4},{c,1}. A host named twice gets the sum of its slots (first
// position kept), as mpirun counts it.
std::vector<Host> parse_host_list(const std::string& list);
// The hosts as parse_host_list reads them ("a:2,b:1"), as mpirun's --host takes them.
std::string format_host_list(const std::vector<Host>& hosts);

// Hostfile text: one `host [slots=N]` per line; `#` starts a comment; blank lines are skipped.
// Messages name `file` and the 1-based line number.
std::vector<Host> parse_hostfile_text(const std::string& text, const std::string& file);

// What a host discovery script printed: one `host[:slots]` per line (Horovod's format; a host
// without a count takes one slot, a name printed twice adds up); surrounding blanks and blank
// lines are skipped. Messages start with `where` and name the 1-based line; no host at all is
// an error too.
std::vector<Host> parse_discovered_hosts(const std::string& text, const std::string& where);

// Reads and parses the hostfile at `path`.
std::vector<Host> read_hostfile(const std::string& path);

// Rejects names that cannot be a host name or an IPv4 address (letters, digits, '.', '-', '_';
// not starting with '-'), so nothing else reaches mpirun's host parsing or the rsh agent's
// command line. `where` says where the name came from ("-H", "hosts.txt:3").
void check_host_name(const std::string& name, const std::string& where);

int total_slots(const std::vector<Host>& hosts);

}  // namespace arcreduce::launcher
