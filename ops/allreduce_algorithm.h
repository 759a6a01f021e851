// Which algorithm MpiCommunicator::allreduce uses (config: ARCREDUCE_ALLREDUCE_ALGORITHM).
#pragma once

#include <cstddef>
#include <string>

namespace arcreduce {

enum class AllreduceAlgorithm {
  // When the job spans several hosts: the algorithm of least predicted time under the link
  // measured at construction (ops/link_model.h), or kThresholds' choice where no measurement is
  // there; on one host MPI_Allreduce. See docs/design/communicators-allreduce.md.
  kAuto,
  // Our bandwidth-optimal segmented ring (reduce-scatter + all-gather) over MPI_Isend/Irecv.
  kRing,
  // MPI_Allreduce(MPI_IN_PLACE), i.e. whatever the MPI library picks.
  kMpi,
  // Recursive doubling over MPI_Isend/Irecv (ops/doubling_allreduce.h): fewest rounds, each
  // moving the whole message; messages above the largest single MPI message take the ring.
  kDoubling,
  // Reduce-scatter by recursive halving + all-gather by recursive doubling
  // (ops/halving_allreduce.h): the ring's bytes in 2 log2 P rounds; messages above the largest
  // single MPI message take the ring.
  kRabenseifner,
  // Across hosts, fixed byte thresholds: the ring for messages of at least the ring threshold
  // (256 KiB; 1 MiB at two ranks), recursive doubling below it; on one host MPI_Allreduce (what
  // kAuto did before it measured the link).
  kThresholds,
};

// "auto", "ring", "mpi", "doubling", "rabenseifner", "thresholds".
const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);

// Parses one of those names (case-insensitive, surrounding blanks ignored).
// Throws arcreduce::Error(kInvalidArgument) naming `variable`, the value and the accepted values.
AllreduceAlgorithm parse_allreduce_algorithm(
    const std::string& value, const std::string& variable = "ARCREDUCE_ALLREDUCE_ALGORITHM");

// The decision kThresholds makes (and kAuto's without a measured link), exposed so it can be
// tested and logged; kAuto and kThresholds return one of ring, rabenseifner, doubling and mpi,
// every other algorithm returns itself. `ring_threshold_bytes` applies from three ranks, where
// recursive doubling sends more bytes than the ring (log2 P times the message against 2 (P - 1) / P
// times it); at two ranks both send the message once, doubling in one round, and the ring takes
// over only from kTwoRankRingThresholdBytes, where its segments pay. Beyond kRingThresholdRanks
// ranks the ring's 2 (P - 1) rounds each move 1/P of the message, so its threshold grows with P
// (ring_threshold_for()); between the two thresholds Rabenseifner sends the ring's bytes in
// 2 log2 P rounds.
AllreduceAlgorithm resolve_allreduce_algorithm(AllreduceAlgorithm algorithm, size_t bytes, int size,
                                               int local_size, size_t ring_threshold_bytes);
constexpr size_t kRingThresholdBytes = size_t{256} << 10;
constexpr size_t kTwoRankRingThresholdBytes = size_t{1} << 20;
constexpr int kRingThresholdRanks = 8;
// The ring's threshold among `size` ranks: kTwoRankRingThresholdBytes at two,
// `ring_threshold_bytes` up to kRingThresholdRanks, above that in proportion to the ranks, so that
// each rank's chunk stays at least ring_threshold_bytes / kRingThresholdRanks (32 KiB by default).
// A function of the rank count alone, so the ring's line (which sums in another order than the
// trees) does not move with a measurement.
size_t ring_threshold_for(int size, size_t ring_threshold_bytes);

// Whether allreduce() reduces within each host first (ARCREDUCE_HIERARCHICAL): the host's ranks
// sum into its first rank over shared memory, the hosts' first ranks reduce across hosts, and each
// hands the result back to its host's ranks, so that a host's link carries one rank's traffic.
// What goes by host is decided per message (allreduce_by_host); how the hosts exchange it: where
// every host runs the same number S of ranks, sharded (the host's sum scattered over its ranks,
// local rank l of every host All-Reducing the l-th S-th with its peers), else by the host's first
// rank alone (kLeader always).
enum class Hierarchy {
  kAuto,    // on where a host runs several ranks of a job that spans hosts (the default)
  kOff,     // every rank takes part in the exchange across hosts (flat)
  kOn,      // every All-Reduce by host (kAuto: those the ring would carry between hosts)
  kLeader,  // as kAuto, each host's exchange by its first rank even on even hosts
};

// "auto", "0", "1", "leader".
const char* hierarchy_name(Hierarchy hierarchy);
// Parses "auto", "0"/"off"/"false", "1"/"on"/"true" or "leader" (case-insensitive, blanks
// ignored). Throws arcreduce::Error(kInvalidArgument) naming `variable`, the value and the
// accepted values.
Hierarchy parse_hierarchy(const std::string& value,
                          const std::string& variable = "ARCREDUCE_HIERARCHICAL");

// Whether an All-Reduce of `bytes` goes by host in a job of `hosts` hosts where some host runs
// several ranks (the caller knows that; on one host, or with one rank per host, nothing goes by
// host): under kOn every one; under kAuto and kLeader those the ring carries between the hosts
// (kThresholds' choice among `hosts` ranks), as smaller ones go by trees that already send about
// one host's bytes across the link (docs/design/communicators-several-ranks-per-host.md); under
// kOff none. MpiCommunicator and the loopback world decide by this.
bool allreduce_by_host(Hierarchy hierarchy, size_t bytes, int hosts, size_t ring_threshold_bytes);

// Shared memory: large segments are fastest. Across hosts each segment should travel as one
// eager MPI message (no rendezvous handshake queued behind the link's bulk data), so it is kept
// within the TCP eager limit that init() gives Open MPI (runtime/mpi_environment.h).
constexpr size_t kSingleHostRingSegmentBytes = size_t{4} << 20;
constexpr size_t kMultiHostRingSegmentBytes = size_t{1} << 20;

// The segment a ring uses: `requested` when not 0, else the default for where the ranks are
// (local_size < size: across hosts); at most max_message_bytes, at least 1.
size_t ring_segment_bytes_for(size_t requested, int local_size, int size, size_t max_message_bytes);

}  // namespace arcreduce
