// What an All-Reduce across hosts costs, and the algorithm of least cost (ARCREDUCE_ALLREDUCE_
// ALGORITHM=auto). Measured when the communicator is built (ops/link_probe.h) and agreed by every
// rank, so every rank predicts the same times and picks the same algorithm for a message.
//
// At the communicator's own size each algorithm's time is a line fitted to two measurements of
// it, a tiny message and a bulk one: t(B) = fixed + B * per_byte. What an algorithm really costs
// on a link departs from the textbook count: at 8 hosts x 100 Mbit/s with CPU budgets
// Rabenseifner's 7.4 MB took 1.6x the ring's time for the same bytes, and a tiny message took
// 24-40 ms by any of them, where the link's latency is tens of microseconds.
//
// At any other size (the projections of bench/scale) the textbook costs apply, from three numbers
// of the link:
//   latency    one round: a small message to the right neighbour and one from the left, all
//              ranks at once, the waits included (alpha)
//   per byte   one direction of the slowest neighbour link with every link busy (beta)
//   reduce     reducing one received byte into the buffer on this host's CPU (gamma)
// A message of B bytes over P ranks (p the largest power of two <= P; a P other than p adds
// two whole-message rounds on the folded ranks, f = 2 (alpha + B beta + B gamma), else 0):
//   ring          2 (P - 1) alpha + 2 (P - 1) / P B beta + (P - 1) / P B gamma
//   doubling      log2 p (alpha + B beta + B gamma) + f
//   rabenseifner  2 log2 p alpha + 2 (p - 1) / p B beta + (p - 1) / p B gamma + f
// Open MPI's own algorithm is not predicted (its choice is not observable); it stays the choice
// on one host, where its shared-memory allreduce is the fastest measured.
#pragma once

#include <cstddef>
#include <string>

#include "ops/allreduce_algorithm.h"

namespace arcreduce {

// t(B) = fixed_seconds + B * seconds_per_byte; unmeasured where both are 0.
struct AlgorithmCost {
  double fixed_seconds = 0;
  double seconds_per_byte = 0;
};

struct LinkModel {
  double latency_seconds = 0;
  double seconds_per_byte = 0;
  double reduce_seconds_per_byte = 0;
  // The lines measured for ring, rabenseifner and doubling (in that order) at `ranks` ranks.
  int ranks = 0;
  AlgorithmCost ring, rabenseifner, doubling;
  // False where nothing was measured (one host, a forced algorithm, or a measurement that gave
  // no usable numbers): kAuto then falls back to kThresholds.
  bool measured = false;
};

// The model's time for `algorithm` (ring, doubling or rabenseifner) on `size` ranks: its measured
// line where it was measured at `size` ranks, else the textbook cost; a negative value for any
// other algorithm, which the model does not predict.
double predicted_allreduce_seconds(AllreduceAlgorithm algorithm, size_t bytes, int size,
                                   const LinkModel& link);

// The algorithm `requested` resolves to for a message of `bytes`. kAuto across hosts with a
// measured link: the ring where the thresholds take it (a function of the size alone, so that a
// job's results do not depend on what the probe measured: the ring sums in another order), and
// below that whichever of doubling and Rabenseifner is predicted faster (ties to Rabenseifner,
// which sends less; at two ranks doubling, which sends as much in one round fewer); the two give
// the same bits (ops/halving_allreduce.h). kAuto without a
// measured link, and kThresholds, take resolve_allreduce_algorithm's; on one host (local_size >=
// size) both take MPI's; every other algorithm is itself.
AllreduceAlgorithm choose_allreduce_algorithm(AllreduceAlgorithm requested, size_t bytes, int size,
                                              int local_size, size_t ring_threshold_bytes,
                                              const LinkModel& link);

// "latency 120 us, 94.1 Mbit/s, reduce 1.9 GB/s" or "not measured", for logs.
std::string describe_link(const LinkModel& link);

}  // namespace arcreduce
