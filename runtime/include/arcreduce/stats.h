// Counters of this rank's runtime, read with arcreduce::stats(). All times are seconds spent on
// the coordinator thread; all bytes are payload bytes this rank put on / took off the wire.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "arcreduce/compressor_stats.h"

namespace arcreduce {

struct Stats {
  int rank = 0;
  uint64_t ops_completed = 0;      // ops that finished with an OK status
  uint64_t ops_failed = 0;         // ops that finished with an error status
  uint64_t buckets = 0;            // fused buckets executed
  uint64_t cycles = 0;             // coordinator negotiation cycles
  uint64_t cache_hits = 0;         // tensors negotiated through the response-cache bit vector
  uint64_t full_negotiations = 0;  // cycles that gathered request lists at rank 0
  // Communication calls the coordinator completed (collectives and point-to-point rounds, each
  // a synchronous wait for peers), negotiation included; and those of negotiation alone.
  uint64_t collectives = 0;
  uint64_t negotiation_collectives = 0;
  // Steps whose compressed tensors this rank held until the step's last one, to send them in
  // one cycle (ARCREDUCE_BATCH_COMPRESSED; with "auto", the trial's held steps and every step
  // after it once the ranks agreed to hold).
  uint64_t held_steps = 0;
  // ARCREDUCE_AUTO_COMPRESS (docs/auto-compression.md): "off" (disabled, or no tensor it
  // manages has run yet), "trial" (timing the step compressed and dense), "compressed" or
  // "dense" (decided); and the median steps the decision compared, averaged over the ranks.
  std::string auto_compression = "off";
  double auto_compressed_step_ms = 0;
  double auto_dense_step_ms = 0;
  // CPU time the coordinator thread used (CLOCK_THREAD_CPUTIME_ID): what the runtime takes
  // from the cores the training thread needs. Waiting costs none unless ARCREDUCE_WAIT_MODE
  // polls.
  double coordinator_cpu_seconds = 0;
  uint64_t bytes_sent = 0;  // everything this rank sent: negotiation + data
  uint64_t bytes_received = 0;
  double negotiation_seconds = 0;    // negotiation collectives and planning
  double copy_seconds = 0;           // fusion-buffer gathers/scatters and scaling
  double communication_seconds = 0;  // data collectives of the dense path
  double compression_seconds = 0;    // compressor pipelines, their collectives included
  std::map<std::string, CompressorStats> compressors;  // by compressor name
  // Every All-Reduce this rank ran (data and negotiation), by the algorithm that ran it ("ring",
  // "rabenseifner", "doubling", "mpi"; ARCREDUCE_ALLREDUCE_ALGORITHM), and its payload bytes.
  std::map<std::string, uint64_t> allreduce_calls;
  std::map<std::string, uint64_t> allreduce_bytes;
  // The other collectives this rank ran, by kind ("allgather", "allgatherv", "alltoallv",
  // "broadcast", "gatherv", "point_to_point"), and their payload bytes: a block for allgather,
  // the gathered total for allgatherv and gatherv, what this rank sends for the others.
  std::map<std::string, uint64_t> collective_calls;
  std::map<std::string, uint64_t> collective_bytes;
  // The link the "auto" choice predicts by, measured at init where the job spans hosts (0
  // elsewhere): one round's latency between neighbours and the slowest neighbour link's rate.
  double link_latency_us = 0;
  double link_mbit_per_s = 0;
  // The hosts the job runs on, and whether All-Reduces sum within each host first
  // (ARCREDUCE_HIERARCHICAL; true only where some host runs several ranks of a job across hosts).
  int hosts = 1;
  bool hierarchical = false;
};

}  // namespace arcreduce
