// Output of the benchmark on rank 0: the summary table, the per-step CSV and the plot.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace rso {

// Every run of one compressor setting.
struct Result {
  std::string name;                            // command-line name: none, topk, arctopk-exact...
  std::string reference_name;                  // the reference code's name for it
  std::vector<uint64_t> seeds;                 // one run per seed
  std::vector<std::vector<double>> distances;  // [run][t - 1]: ||w_t - w*|| after step t
  double bytes_sent_per_step = 0;              // rank 0's runtime counters, mean over runs
  uint64_t dense_reductions = 0;  // reductions the runtime did densely instead, all runs
  uint64_t reductions = 0;
};

// Distance after each step, averaged over the runs (seeds).
std::vector<double> mean_over_runs(const Result& result);

// Table of the distance at steps 1, 10, 100, 200, 500, 1000 (those <= steps) and its mean over
// the last 100 steps, per setting, averaged over seeds, with the ratio to "none" when present,
// then the reference's shape to compare with.
void print_table(const std::vector<Result>& results, int steps, std::FILE* out);

// Writes "compressor,seed,step,distance" for every step of every run. Returns "" or an error.
std::string write_csv(const std::vector<Result>& results, const std::string& path);

// Draws log-scale distance (mean over seeds) vs step, one line per setting, as a PNG through
// gnuplot. Returns "" or why no plot was written (e.g. gnuplot is not installed).
std::string write_plot(const std::vector<Result>& results, const std::string& title,
                       const std::string& path);

}  // namespace rso
