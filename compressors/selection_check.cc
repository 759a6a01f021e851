#include "compressors/selection_check.h"

#include "arcreduce/status.h"

namespace arcreduce {

void check_same_selection(Communicator& comm, const std::vector<std::string>& names,
                          const std::vector<uint64_t>& hashes) {
  if (hashes.empty()) return;
  std::vector<uint64_t> lo = hashes, hi = hashes;
  comm.allreduce(lo.data(), lo.size(), ScalarType::kUInt64, CollectiveOp::kMin);
  comm.allreduce(hi.data(), hi.size(), ScalarType::kUInt64, CollectiveOp::kMax);
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (lo[i] != hi[i]) {
      throw Error(
          "ARCREDUCE_CHECK_CONSISTENCY: ranks selected different rows/indices for tensor '" +
              names[i] + "' (rank " + std::to_string(comm.rank()) + " hash " +
              std::to_string(hashes[i]) + ")",
          StatusCode::kInternal);
    }
  }
}

}  // namespace arcreduce
