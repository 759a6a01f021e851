#include "report.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace rso {
namespace {

constexpr int kTableSteps[] = {1, 10, 100, 200, 500, 1000};
constexpr int kTailSteps = 100;  // the table's last column averages the last 100 steps

// The mean of `values` over steps first..last (1-based, inclusive).
double mean_of_steps(const std::vector<double>& values, int first, int last) {
  double sum = 0;
  for (int t = first; t <= last; ++t) sum += values[t - 1];
  return sum / (last - first + 1);
}

// A gnuplot single-quoted string literal (a quote inside is written twice).
std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::vector<double> mean_over_runs(const Result& result) {
  std::vector<double> mean(result.distances.empty() ? 0 : result.distances[0].size(), 0.0);
  for (const std::vector<double>& run : result.distances) {
    for (size_t t = 0; t < mean.size(); ++t) mean[t] += run[t] / result.distances.size();
  }
  return mean;
}

void print_table(const std::vector<Result>& results, int steps, std::FILE* out) {
  if (results.empty()) return;
  const int tail_first = std::max(1, steps - kTailSteps + 1);
  double none_tail = 0;
  for (const Result& r : results) {
    if (r.name == "none") none_tail = mean_of_steps(mean_over_runs(r), tail_first, steps);
  }
  std::string seeds;
  for (uint64_t s : results[0].seeds) seeds += (seeds.empty() ? "" : ",") + std::to_string(s);
  std::fprintf(out, "\ndistance ||w_t - w*|| after step t, mean over seeds %s\n", seeds.c_str());
  std::fprintf(out, "%-15s %-15s", "compressor", "reference");
  for (int t : kTableSteps) {
    if (t <= steps) std::fprintf(out, " %9s", ("t=" + std::to_string(t)).c_str());
  }
  const std::string tail = "mean " + std::to_string(tail_first) + ".." + std::to_string(steps);
  std::fprintf(out, " %14s %8s %9s %11s\n", tail.c_str(), "x none", "KB/step", "dense/all");
  for (const Result& r : results) {
    const std::vector<double> mean = mean_over_runs(r);
    std::fprintf(out, "%-15s %-15s", r.name.c_str(), r.reference_name.c_str());
    for (int t : kTableSteps) {
      if (t <= steps) std::fprintf(out, " %9.3e", mean[t - 1]);
    }
    const double tail_mean = mean_of_steps(mean, tail_first, steps);
    std::fprintf(out, " %14.3e", tail_mean);
    if (none_tail > 0) {
      std::fprintf(out, " %8.2f", tail_mean / none_tail);
    } else {
      std::fprintf(out, " %8s", "-");
    }
    std::fprintf(out, " %9.2f %5llu/%-5llu\n", r.bytes_sent_per_step / 1e3,
                 static_cast<unsigned long long>(r.dense_reductions),
                 static_cast<unsigned long long>(r.reductions));
  }
  std::fprintf(out,
               "KB/step: bytes rank 0 sent per step for the tensor (runtime stats); dense/all: "
               "reductions the runtime did densely instead of compressing.\n"
               "reference shape (noisy runs, 1000 steps): uncompressed ~1e-3; Local TopK stalls "
               "~6e-2; ArcTopK and ArcTopK-Sketch within ~3x of uncompressed.\n");
}

std::string write_csv(const std::vector<Result>& results, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return "cannot open " + path + " for writing";
  std::fprintf(f, "compressor,seed,step,distance\n");
  for (const Result& r : results) {
    for (size_t run = 0; run < r.distances.size(); ++run) {
      for (size_t t = 0; t < r.distances[run].size(); ++t) {
        std::fprintf(f, "%s,%llu,%zu,%.10e\n", r.name.c_str(),
                     static_cast<unsigned long long>(r.seeds[run]), t + 1, r.distances[run][t]);
      }
    }
  }
  return std::fclose(f) == 0 ? "" : "error writing " + path;
}

std::string write_plot(const std::vector<Result>& results, const std::string& title,
                       const std::string& path) {
  if (results.empty()) return "nothing to plot";
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return "gnuplot is not installed (Debian: apt-get install gnuplot-nox, which "
           "scripts/install-deps.sh does)";
  }
  std::FILE* gp = popen("gnuplot", "w");
  if (gp == nullptr) return "cannot start gnuplot";
  std::fprintf(gp, "set terminal pngcairo size 1000,640 noenhanced\nset output %s\n",
               gnuplot_quote(path).c_str());
  std::fprintf(gp, "set title %s\nset logscale y\nset format y '%%.0e'\nset grid\n",
               gnuplot_quote(title).c_str());
  std::fprintf(gp, "set xlabel 'step'\nset ylabel '||w_t - w*|| (mean over seeds)'\n");
  std::fprintf(gp, "set key outside right\n");
  // Okabe-Ito colours, distinguishable in colour-blind vision; lines beyond 7 repeat them.
  const char* colors[] = {"000000", "E69F00", "56B4E9", "009E73", "D55E00", "0072B2", "CC79A7"};
  for (int i = 0; i < 7; ++i) {
    std::fprintf(gp, "set linetype %d lc rgb '#%s' lw 2\n", i + 1, colors[i]);
  }
  std::fprintf(gp, "set linetype cycle 7\n");
  // One inline data block: step, then one column per setting.
  std::fprintf(gp, "$d << EOD\nstep");
  for (const Result& r : results) std::fprintf(gp, " %s", r.name.c_str());
  std::vector<std::vector<double>> means;
  for (const Result& r : results) means.push_back(mean_over_runs(r));
  std::fprintf(gp, "\n");
  for (size_t t = 0; t < means[0].size(); ++t) {
    std::fprintf(gp, "%zu", t + 1);
    for (const std::vector<double>& m : means) std::fprintf(gp, " %.6e", m[t]);
    std::fprintf(gp, "\n");
  }
  std::fprintf(gp, "EOD\nplot for [i=2:%zu] $d using 1:i with lines title columnheader\n",
               results.size() + 1);
  const int status = pclose(gp);
  if (status != 0) return "gnuplot failed (status " + std::to_string(status) + ")";
  return "";
}

}  // namespace rso
