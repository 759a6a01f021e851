// Rank 0's output: progress lines, the run summary, the --compare table, CSV and plot.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "trainer.h"

namespace fmnist {

// "dense" for the runtime's "none", the runtime's name otherwise.
std::string display_name(const std::string& compressor);

// What every run of the job shares, for titles and summaries.
struct JobDescription {
  int ranks = 0;
  int64_t train_examples = 0;
  int64_t test_examples = 0;
  TrainOptions options;  // of the first (or only) run
  int64_t parameters = 0;
};

std::string describe(const JobDescription& job);
// describe() short enough for a plot's title.
std::string plot_title(const JobDescription& job);

// One line per epoch with the ETA of the whole job (all runs of --compare).
class ProgressPrinter {
 public:
  ProgressPrinter(bool print, int64_t total_epochs) : print_(print), left_(total_epochs) {}
  void epoch(const std::string& compressor, int64_t epochs, const EpochResult& r);
  // A run ended without training `epochs` epochs (skipped, or resumed past them).
  void drop(int64_t epochs) { left_ -= epochs; }

 private:
  bool print_;
  int64_t left_;
  int64_t done_ = 0;
  double seconds_ = 0;
};

// The single run's summary: accuracy, loss, step time, bytes, overlap, rank agreement.
void print_summary(const RunResult& run, const JobDescription& job, std::FILE* out);
// One row per compressor of --compare (skipped ones say why).
void print_compare_table(const std::vector<RunResult>& runs, const JobDescription& job,
                         std::FILE* out);
// epoch,compressor,ratio,seed,train_loss,test_accuracy,step_time_s,bytes_per_step; returns ""
// or what went wrong.
std::string write_csv(const std::vector<RunResult>& runs, const JobDescription& job,
                      const std::string& path);
// Train loss and test accuracy against the epoch, one line per run (gnuplot, PNG); returns ""
// or why no plot was written.
std::string write_plot(const std::vector<RunResult>& runs, const std::string& title,
                       const std::string& path);

// The step benchmark's result as one JSON line, {"bench": "e2e", ...} (bench/e2e reads it):
// settings, every timed step's duration, median, p90 and rank 0's counters per step.
void print_step_bench_json(const StepBenchResult& r, const JobDescription& job, bool communicate,
                           std::FILE* out);

// --tta: one JSON line {"bench": "tta", ...} with every evaluation point (bench/tta reads it).
// `job.options` holds what the user asked for; `used` what the run used after pairing error
// feedback with the SGD (optimizer_pairing.h).
void print_tta_json(const TimeToAccuracyResult& r, const JobDescription& job,
                    const TrainOptions& used, double target, std::FILE* out);

}  // namespace fmnist
