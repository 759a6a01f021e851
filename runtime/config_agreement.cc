#include "runtime/config_agreement.h"

#include <cstdint>
#include <vector>

#include "arcreduce/status.h"
#include "runtime/config_fields.h"

namespace arcreduce {
namespace {

std::string serialize(const Config& config) {
  std::string s;
  for (const auto& kv : must_match_settings(config)) s += kv.first + "=" + kv.second + "\n";
  return s;
}

// First "VAR: rank 0 has A, this rank has B" difference between two serialized settings.
std::string first_difference(const std::string& root, const std::string& mine, int rank) {
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t end; (end = s.find('\n', start)) != std::string::npos; start = end + 1) {
      out.push_back(s.substr(start, end - start));
    }
    return out;
  };
  auto a = lines(root), b = lines(mine);
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] == b[i]) continue;
    size_t eq = a[i].find('=');
    return a[i].substr(0, eq) + " must be the same on every rank: rank 0 has '" +
           a[i].substr(eq + 1) + "', rank " + std::to_string(rank) + " has '" +
           b[i].substr(b[i].find('=') + 1) + "'";
  }
  return "";
}

}  // namespace

void agree_on_config(Communicator& comm, const Config* config, const std::string& local_error) {
  std::string error = local_error;
  if (config == nullptr && error.empty()) error = "no configuration";
  std::string root_settings = (comm.rank() == 0 && config) ? serialize(*config) : "";
  comm.broadcast(&root_settings, 0);
  if (error.empty() && !root_settings.empty()) {
    error = first_difference(root_settings, serialize(*config), comm.rank());
  }
  std::vector<uint8_t> failed(comm.size());
  uint8_t mine = error.empty() ? 0 : 1;
  comm.allgather(&mine, 1, failed.data());
  int first = -1;
  std::string failing;
  for (int r = 0; r < comm.size(); ++r) {
    if (!failed[r]) continue;
    if (first < 0) first = r;
    failing += (failing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (first < 0) return;
  std::string message = comm.rank() == first ? error : "";
  comm.broadcast(&message, first);
  throw Error("arcreduce configuration rejected (failing rank" +
              std::string(failing.find(',') == std::string::npos ? " " : "s ") + failing +
              "): rank " + std::to_string(first) + ": " + message);
}

}  // namespace arcreduce
