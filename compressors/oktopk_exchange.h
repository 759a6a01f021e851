// The two data movements of Ok-Topk, over byte blocks (the compressor packs the records).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/communicator.h"

namespace arcreduce {
namespace oktopk {

// Split and reduce's transport. Rank r sends send_bytes[d] bytes (blocks back to back in rank
// order at `send`; its own block is skipped) to every other rank d and receives recv_bytes[q]
// bytes from every other q, in P - 1 rotated steps: step s sends to r + s and receives from
// r - s (mod P). At most `max_in_flight` steps are posted at a time; consume(q, block, bytes)
// runs on each received block, in step order, while the later steps travel. Empty blocks are
// neither sent nor received (both sides know the sizes). `tag` keeps these messages apart.
void rotated_exchange(Communicator& comm, const uint8_t* send,
                      const std::vector<size_t>& send_bytes, const std::vector<size_t>& recv_bytes,
                      int tag, int max_in_flight,
                      const std::function<void(int, const uint8_t*, size_t)>& consume);

// All-Gather(v): rank q contributes block_bytes[q] bytes (`mine` on this rank); `out` receives
// all blocks back to back in rank order. With `balance`, the concatenation is first re-cut into
// P nearly equal pieces of whole records (`record_bytes` each), moved to their owners by
// point-to-point messages (tag `tag`), and the pieces are gathered instead: the result is the
// same bytes, but no rank's block is much larger than the others' (the "phase 2 rebalancing"
// of the paper's BERT variant).
void gather_blocks(Communicator& comm, const uint8_t* mine, const std::vector<size_t>& block_bytes,
                   size_t record_bytes, bool balance, int tag, uint8_t* out);

}  // namespace oktopk
}  // namespace arcreduce
