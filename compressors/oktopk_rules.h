// The local decisions of Ok-Topk (specs/ok-topk.md), kept free of communication so that tests
// can check them directly: threshold selection and adjustment, region boundaries. Every
// function is deterministic, so ranks that feed it identical data get identical results.
#pragma once

#include <cstdint>
#include <vector>

namespace arcreduce {
namespace oktopk {

// Constants of the paper and the authors' code.
constexpr double kLocalGrowth = 1.03;   // step 2: lthr *= 1.03 while the count exceeds 4k/3
constexpr int kLocalGrowthTries = 5;    // ... at most 5 times
constexpr double kLocalNudge = 1.012;   // step 4: count < 2k/3 -> /1.012, > 5k/4 -> *1.012
constexpr double kGlobalNudge = 1.008;  // step 6: count < 2k/3 -> /1.008, > 4k/3 -> *1.008

// k = floor(n * density); 0 for n <= 0.
int64_t kept_entries(double density, int64_t n);

// Exact local selection: the k entries of largest |x| (ties to the lower index), minus exact
// zeros (they carry nothing); ascending. *kth gets the k-th largest |x| over all n entries
// (0 when fewer than k are non-zero), the threshold later calls compare against with '>'.
std::vector<int64_t> exact_local_selection(const float* x, int64_t n, int64_t k, double* kth);

// Threshold selection: ascending indices with |x| > threshold (never zeros, never NaN).
std::vector<int64_t> above(const float* x, int64_t n, double threshold);
int64_t count_above(const float* x, int64_t n, double threshold);

// Step 2 between exact calls: raises `threshold` by kLocalGrowth while more than 4k/3 entries
// exceed it, at most kLocalGrowthTries times.
double raise_local_threshold(const float* x, int64_t n, int64_t k, double threshold);
// Step 4: the local threshold of the next call after selecting `count` entries.
double nudge_local_threshold(double threshold, int64_t count, int64_t k);
// Step 6 between exact calls: the global threshold of the next call after `count` survivors.
double nudge_global_threshold(double threshold, int64_t count, int64_t k);

// off[0..P] with off[j] = floor(j n / P).
std::vector<int64_t> even_boundaries(int64_t n, int ranks);
// Step 3, this rank's part: P - 1 candidates S[j c], c = floor(|S| / P), j = 1..P-1, when
// |S| >= P; empty otherwise (the rank abstains).
std::vector<int64_t> boundary_candidates(const std::vector<int64_t>& selection, int ranks);
// Step 3 after the sum over ranks: `sums` holds the P - 1 summed candidates of the `voters`
// ranks that did not abstain. Boundary j = floor(sum_j / voters); with no voter, `previous`
// (even regions when it is empty).
std::vector<int64_t> agreed_boundaries(const std::vector<int64_t>& sums, int64_t voters,
                                       const std::vector<int64_t>& previous, int64_t n, int ranks);

// One reduced entry: tensor-relative index and summed value.
struct Entry {
  int64_t index;
  float value;
};
// Exact global selection: the k entries of largest |value| (ties to the lower index), ascending
// by index; all of them when there are at most k. *kth gets the k-th largest |value| (0 when
// there are fewer than k entries: the missing ones are zeros).
std::vector<Entry> exact_global_selection(std::vector<Entry> entries, int64_t k, double* kth);

}  // namespace oktopk
}  // namespace arcreduce
