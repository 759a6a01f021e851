#include "runtime/process_sets.h"

#include <algorithm>
#include <cstdint>

#include "tensor_queue/message.h"

namespace arcreduce {

std::string ranks_string(const std::vector<int>& ranks) {
  return shape_string(std::vector<int64_t>(ranks.begin(), ranks.end()));
}

int rank_in_set(const std::vector<int>& ranks, int global_rank) {
  const auto it = std::lower_bound(ranks.begin(), ranks.end(), global_rank);
  return it != ranks.end() && *it == global_rank ? static_cast<int>(it - ranks.begin()) : -1;
}

std::string check_process_set_ranks(const std::vector<int>& ranks, int world_size) {
  if (ranks.empty()) return "a process set needs at least one rank";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size) {
      return "rank " + std::to_string(ranks[i]) + " is not a rank of the job (0-" +
             std::to_string(world_size - 1) + ")";
    }
    if (i && ranks[i] == ranks[i - 1]) {
      return "rank " + std::to_string(ranks[i]) + " is listed twice";
    }
  }
  return "";
}

std::string process_set_timeline(const std::string& path, int id) {
  const std::string tag = ".set" + std::to_string(id);
  const std::string ext = ".json";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) {
    return path.substr(0, path.size() - ext.size()) + tag + ext;
  }
  return path + tag;
}

namespace {

uint64_t digest_of(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the count and the ranks
  auto mix = [&h](uint64_t v) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
  };
  mix(ranks.size());
  for (int r : ranks) mix(static_cast<uint32_t>(r));
  return h;
}

}  // namespace

void agree_on_process_set(MPI_Comm comm, const std::vector<int>& ranks, const std::string& error,
                          const std::string& what) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Per rank: whether it failed its own check, and the digest of its list.
  const uint64_t mine[2] = {error.empty() ? 0u : 1u, digest_of(ranks)};
  std::vector<uint64_t> all(2 * static_cast<size_t>(size));
  if (MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm) != MPI_SUCCESS) {
    throw Error(what + ": MPI_Allgather failed", StatusCode::kInternal);
  }
  std::vector<int> failed, differ;
  for (int r = 0; r < size; ++r) {
    if (all[2 * r]) failed.push_back(r);
    if (all[2 * r + 1] != all[1]) differ.push_back(r);
  }
  if (!failed.empty()) {
    // Every rank names the first failing rank; that rank also says why.
    std::string message =
        what + ": refused on rank" + (failed.size() > 1 ? "s " : " ") + ranks_string(failed);
    if (!error.empty()) message += ": " + error;
    throw Error(message);
  }
  if (!differ.empty()) {
    throw Error(what + ": every rank must pass the same ranks, in the same order of calls; rank" +
                (differ.size() > 1 ? "s " : " ") + ranks_string(differ) +
                " passed other ranks than rank 0 (this rank passed " + ranks_string(ranks) + ")");
  }
}

}  // namespace arcreduce
