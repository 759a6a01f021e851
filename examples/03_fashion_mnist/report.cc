#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace fmnist {
namespace {

std::string widths_text(const std::vector<int64_t>& widths) {
  std::string s;
  for (int64_t w : widths) s += (s.empty() ? "" : "-") + std::to_string(w);
  return s;
}

std::string bytes_text(double bytes) {
  char text[32];
  if (bytes >= 1e6) {
    std::snprintf(text, sizeof(text), "%.2f MB", bytes / 1e6);
  } else {
    std::snprintf(text, sizeof(text), "%.1f KB", bytes / 1e3);
  }
  return text;
}

bool uses_ratio(const std::string& compressor) {
  return compressor != "none" && compressor != "fp16";
}

// A gnuplot single-quoted string literal (a quote inside is written twice).
std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The median of an even count is the mean of the middle two, as bench/e2e/make_report.py
// computes it; 0 for no values.
double median_of_sorted(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n == 0 ? 0 : (sorted[(n - 1) / 2] + sorted[n / 2]) / 2;
}

void print_seconds(const std::vector<double>& values, std::FILE* out) {
  for (size_t i = 0; i < values.size(); ++i) std::fprintf(out, "%s%.6f", i ? ", " : "", values[i]);
}

}  // namespace

std::string display_name(const std::string& compressor) {
  return compressor == "none" ? "dense" : compressor;
}

std::string describe(const JobDescription& job) {
  const TrainOptions& o = job.options;
  char text[400];
  std::snprintf(text, sizeof(text),
                "Fashion-MNIST: MLP %s (%lld parameters), %d ranks x batch %lld, SGD lr %g "
                "momentum %g, ratio %g, error feedback %s, %lld training / %lld test examples, "
                "seed %llu",
                widths_text(o.widths).c_str(), static_cast<long long>(job.parameters), job.ranks,
                static_cast<long long>(o.batch_size), o.lr, o.momentum, o.ratio,
                o.error_feedback.c_str(), static_cast<long long>(job.train_examples),
                static_cast<long long>(job.test_examples), static_cast<unsigned long long>(o.seed));
  return text;
}

std::string plot_title(const JobDescription& job) {
  const TrainOptions& o = job.options;
  char text[200];
  std::snprintf(text, sizeof(text),
                "Fashion-MNIST, MLP %s, %d ranks x batch %lld, ratio %g, %s, %lld examples, "
                "seed %llu",
                widths_text(o.widths).c_str(), job.ranks, static_cast<long long>(o.batch_size),
                o.ratio, o.error_feedback.c_str(), static_cast<long long>(job.train_examples),
                static_cast<unsigned long long>(o.seed));
  return text;
}

void ProgressPrinter::epoch(const std::string& compressor, int64_t epochs, const EpochResult& r) {
  ++done_;
  --left_;
  seconds_ += r.seconds;
  if (!print_) return;
  std::printf(
      "epoch %lld/%lld  %-8s  loss %.4f  test acc %6.2f%%  step %6.1f ms  sent %s/step  "
      "epoch %.1f s  ETA %.0f s\n",
      static_cast<long long>(r.epoch), static_cast<long long>(epochs),
      display_name(compressor).c_str(), r.train_loss, 100 * r.test_accuracy, 1e3 * r.step_seconds,
      bytes_text(r.bytes_per_step).c_str(), r.seconds, left_ * seconds_ / done_);
  std::fflush(stdout);
}

void print_summary(const RunResult& run, const JobDescription& job, std::FILE* out) {
  std::fprintf(out, "\nsummary (%s", display_name(run.compressor).c_str());
  if (uses_ratio(run.compressor)) std::fprintf(out, " ratio %g", job.options.ratio);
  std::fprintf(out, ", %lld steps of %lld examples per rank):\n",
               static_cast<long long>(run.global_step),
               static_cast<long long>(job.options.batch_size));
  if (!run.epochs.empty()) {
    const EpochResult& last = run.epochs.back();
    const double dense_bytes = 4.0 * static_cast<double>(run.parameters);
    std::fprintf(out, "  test accuracy  %.2f%% after epoch %lld (train loss %.4f)\n",
                 100 * last.test_accuracy, static_cast<long long>(last.epoch), last.train_loss);
    std::fprintf(out, "  step time      %.1f ms (last epoch's mean: compute, communication, SGD)\n",
                 1e3 * last.step_seconds);
    std::fprintf(out, "  sent per step  %s by rank 0; the fp32 gradients are %s (%.1fx)\n",
                 bytes_text(last.bytes_per_step).c_str(), bytes_text(dense_bytes).c_str(),
                 dense_bytes / last.bytes_per_step);
  }
  const OverlapResult& o = run.overlap;
  if (o.steps > 0) {
    const OverlapResult::Phases &m = o.mean_over_ranks, &l = o.longest_rank;
    std::fprintf(out,
                 "  overlap        compute only %.1f ms, communication only %.1f ms, overlapped "
                 "step %.1f ms: %.0f%% of the communication hidden (median of %d steps)\n",
                 1e3 * m.compute_seconds, 1e3 * m.communication_seconds, 1e3 * m.step_seconds,
                 100 * o.hidden_fraction(), o.steps);
    std::fprintf(out,
                 "  longest rank   compute only %.1f ms, communication only %.1f ms, overlapped "
                 "step %.1f ms (median over steps of each step's longest rank)\n",
                 1e3 * l.compute_seconds, 1e3 * l.communication_seconds, 1e3 * l.step_seconds);
  }
  std::fprintf(out, "  ranks agree    %s (model fnv1a64 %016llx)\n",
               run.ranks_agree ? "yes, bit-identical parameters" : "NO: parameters differ",
               static_cast<unsigned long long>(run.weights_hash));
}

void print_compare_table(const std::vector<RunResult>& runs, const JobDescription& job,
                         std::FILE* out) {
  double dense_step = 0;
  for (const RunResult& r : runs) {
    if (r.compressor == "none" && !r.epochs.empty()) dense_step = r.epochs.back().step_seconds;
  }
  std::fprintf(out, "\ncompressors at ratio %g, %lld epoch(s), same seed and data:\n",
               job.options.ratio, static_cast<long long>(job.options.epochs));
  std::fprintf(out, "%-10s %9s %10s %9s %9s %11s %9s %7s\n", "compressor", "test acc", "train loss",
               "step ms", "x dense", "sent/step", "x smaller", "hidden");
  for (const RunResult& r : runs) {
    if (!r.skipped.empty()) {
      std::fprintf(out, "%-10s skipped: %s\n", display_name(r.compressor).c_str(),
                   r.skipped.c_str());
      continue;
    }
    const EpochResult& last = r.epochs.back();
    const double dense_bytes = 4.0 * static_cast<double>(r.parameters);
    std::fprintf(out, "%-10s %8.2f%% %10.4f %9.1f ", display_name(r.compressor).c_str(),
                 100 * last.test_accuracy, last.train_loss, 1e3 * last.step_seconds);
    if (dense_step > 0) {
      std::fprintf(out, "%9.2f", last.step_seconds / dense_step);
    } else {
      std::fprintf(out, "%9s", "-");
    }
    std::fprintf(out, " %11s %9.1f", bytes_text(last.bytes_per_step).c_str(),
                 dense_bytes / last.bytes_per_step);
    if (r.overlap.steps > 0) {
      std::fprintf(out, " %6.0f%%\n", 100 * r.overlap.hidden_fraction());
    } else {
      std::fprintf(out, " %7s\n", "-");
    }
  }
  std::fprintf(out,
               "step ms: last epoch's mean step; sent/step: bytes rank 0 sent per step; x "
               "smaller: fp32 gradient bytes / sent; hidden: share of the communication time "
               "hidden behind backward.\n");
}

std::string write_csv(const std::vector<RunResult>& runs, const JobDescription& job,
                      const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return "cannot open " + path + " for writing";
  std::fprintf(f,
               "epoch,compressor,ratio,seed,train_loss,test_accuracy,step_time_s,"
               "bytes_per_step\n");
  for (const RunResult& r : runs) {
    for (const EpochResult& e : r.epochs) {
      std::fprintf(f, "%lld,%s,%g,%llu,%.6f,%.4f,%.6f,%.0f\n", static_cast<long long>(e.epoch),
                   display_name(r.compressor).c_str(), job.options.ratio,
                   static_cast<unsigned long long>(job.options.seed), e.train_loss, e.test_accuracy,
                   e.step_seconds, e.bytes_per_step);
    }
  }
  return std::fclose(f) == 0 ? "" : "error writing " + path;
}

std::string write_plot(const std::vector<RunResult>& runs, const std::string& title,
                       const std::string& path) {
  std::vector<const RunResult*> plotted;
  for (const RunResult& r : runs) {
    if (!r.epochs.empty()) plotted.push_back(&r);
  }
  if (plotted.empty()) return "nothing to plot";
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return "gnuplot is not installed (Debian: apt-get install gnuplot-nox, which "
           "scripts/install-deps.sh does)";
  }
  std::FILE* gp = popen("gnuplot", "w");
  if (gp == nullptr) return "cannot start gnuplot";
  std::fprintf(gp, "set terminal pngcairo size 1100,480 noenhanced\nset output %s\n",
               gnuplot_quote(path).c_str());
  // Okabe-Ito colours, distinguishable in colour-blind vision.
  const char* colors[] = {"000000", "E69F00", "56B4E9", "009E73", "D55E00", "0072B2", "CC79A7"};
  for (int i = 0; i < 7; ++i) {
    std::fprintf(gp, "set linetype %d lc rgb '#%s' lw 2 pt 7 ps 0.8\n", i + 1, colors[i]);
  }
  std::fprintf(gp, "set linetype cycle 7\nset grid\nset xlabel 'epoch'\nset xtics 1\n");
  for (size_t i = 0; i < plotted.size(); ++i) {
    std::fprintf(gp, "$d%zu << EOD\n", i);
    for (const EpochResult& e : plotted[i]->epochs) {
      std::fprintf(gp, "%lld %.6f %.4f\n", static_cast<long long>(e.epoch), e.train_loss,
                   100 * e.test_accuracy);
    }
    std::fprintf(gp, "EOD\n");
  }
  std::fprintf(gp, "set multiplot layout 1,2 title %s\n", gnuplot_quote(title).c_str());
  for (int panel = 0; panel < 2; ++panel) {
    std::fprintf(gp, "set ylabel '%s'\nset key %s\nplot ",
                 panel == 0 ? "train loss (mean over the epoch)" : "test accuracy (%)",
                 panel == 0 ? "top right" : "bottom right");
    for (size_t i = 0; i < plotted.size(); ++i) {
      std::fprintf(gp, "%s$d%zu using 1:%d with linespoints title %s", i ? ", " : "", i, panel + 2,
                   gnuplot_quote(display_name(plotted[i]->compressor)).c_str());
    }
    std::fprintf(gp, "\n");
  }
  std::fprintf(gp, "unset multiplot\n");
  const int status = pclose(gp);
  if (status != 0) return "gnuplot failed (status " + std::to_string(status) + ")";
  return "";
}

// "key": {"name": value / steps, ...},
static void print_per_step(const char* key, const std::map<std::string, uint64_t>& values,
                           double steps, std::FILE* out) {
  std::fprintf(out, "\"%s\": {", key);
  const char* separator = "";
  for (const auto& [name, value] : values) {
    std::fprintf(out, "%s\"%s\": %.3f", separator, name.c_str(),
                 static_cast<double>(value) / steps);
    separator = ", ";
  }
  std::fprintf(out, "}, ");
}

void print_step_bench_json(const StepBenchResult& r, const JobDescription& job, bool communicate,
                           std::FILE* out) {
  std::vector<double> sorted = r.step_seconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  // p90 is the nearest rank round(0.9 (n - 1)), as bench/e2e/make_report.py computes it.
  const double median = median_of_sorted(sorted);
  const double p90 = n == 0 ? 0 : sorted[static_cast<size_t>(std::lround(0.9 * (n - 1)))];
  const double steps = n == 0 ? 1 : static_cast<double>(n);
  const TrainOptions& o = job.options;
  std::fprintf(out,
               "{\"bench\": \"e2e\", \"program\": \"train_fashion_mnist\", \"variant\": \"%s\", "
               "\"model\": \"mlp %s\", \"parameters\": %lld, \"gradient_bytes\": %lld, "
               "\"batch_per_rank\": %lld, \"ranks\": %d, ",
               communicate ? display_name(o.compressor).c_str() : "floor",
               widths_text(o.widths).c_str(), static_cast<long long>(r.parameters),
               static_cast<long long>(4 * r.parameters), static_cast<long long>(o.batch_size),
               job.ranks);
  if (communicate) {
    std::fprintf(out,
                 "\"compressor\": \"%s\", \"ratio\": %g, \"error_feedback\": \"%s\", "
                 "\"bytes_sent_per_step\": %.1f, \"bytes_source\": \"arcreduce stats, rank 0\", "
                 "\"collectives_per_step\": %.3f, \"negotiation_collectives_per_step\": %.3f, "
                 "\"coordinator_cpu_s_per_step\": %.6f, \"held_steps\": %llu, ",
                 o.compressor.c_str(), uses_ratio(o.compressor) ? o.ratio : 0.0,
                 o.error_feedback.c_str(), static_cast<double>(r.bytes_sent) / steps,
                 static_cast<double>(r.collectives) / steps,
                 static_cast<double>(r.negotiation_collectives) / steps,
                 r.coordinator_cpu_seconds / steps, static_cast<unsigned long long>(r.held_steps));
    uint64_t allreduce_bytes = 0;
    for (const auto& entry : r.allreduce_bytes) allreduce_bytes += entry.second;
    // null unless --link-counters counted them
    const std::string link_bytes =
        r.link_bytes ? std::to_string(static_cast<double>(r.link_bytes) / steps) : "null";
    print_per_step("allreduce_calls_per_step", r.allreduce_calls, steps, out);
    print_per_step("allreduce_bytes_per_step", r.allreduce_bytes, steps, out);
    print_per_step("collective_calls_per_step", r.collective_calls, steps, out);
    print_per_step("collective_bytes_per_step", r.collective_bytes, steps, out);
    std::fprintf(out,
                 "\"allreduce_payload_bytes_per_step\": %.1f, \"link_latency_us\": %.1f, "
                 "\"link_mbit_per_s\": %.2f, \"hosts\": %d, \"hierarchical\": %s, "
                 "\"link_bytes_per_step\": %s, ",
                 static_cast<double>(allreduce_bytes) / steps, r.link_latency_us, r.link_mbit_per_s,
                 r.hosts, r.hierarchical ? "true" : "false", link_bytes.c_str());
  } else {
    // Nothing is submitted. Rank 0's counters would only show the negotiation that peers which
    // finished first start for the final collection of the times, so none are reported.
    std::fprintf(out,
                 "\"compressor\": null, \"ratio\": 0, \"bytes_sent_per_step\": 0, "
                 "\"bytes_source\": \"none (no communication)\", \"collectives_per_step\": null, "
                 "\"negotiation_collectives_per_step\": null, "
                 "\"coordinator_cpu_s_per_step\": null, \"held_steps\": null, ");
  }
  std::fprintf(out,
               "\"warmup\": %d, \"steps\": %zu, \"timing\": \"per step, the longest rank\", "
               "\"median_s\": %.6f, \"p90_s\": %.6f, \"step_s\": [",
               r.warmup, n, median, p90);
  print_seconds(r.step_seconds, out);
  // Each step's longest rank's wait after backward: the exchange that did not overlap. The rest
  // of that step is compute (forward, backward, optimizer) on cores shared with the runtime.
  std::vector<double> waits = r.wait_seconds;
  std::sort(waits.begin(), waits.end());
  std::fprintf(out, "], \"median_wait_s\": %.6f, \"wait_s\": [", median_of_sorted(waits));
  print_seconds(r.wait_seconds, out);
  std::fprintf(out, "]}\n");
  std::fflush(out);
}

void print_tta_json(const TimeToAccuracyResult& r, const JobDescription& job,
                    const TrainOptions& used, double target, std::FILE* out) {
  const TrainOptions& o = job.options;
  std::fprintf(out,
               "{\"bench\": \"tta\", \"program\": \"train_fashion_mnist\", \"model\": \"mlp %s\", "
               "\"ranks\": %d, \"batch_per_rank\": %lld, \"train_examples\": %lld, "
               "\"test_examples\": %lld, \"compressor\": \"%s\", \"ratio\": %g, "
               "\"error_feedback\": \"%s\", \"error_feedback_used\": \"%s\", \"seed\": %llu, "
               "\"lr\": %g, \"momentum\": %g, \"sgd_lr\": %g, \"sgd_momentum\": %g, "
               "\"target\": %.6f, \"reached\": %s, \"ranks_agree\": %s, "
               "\"steps_per_epoch\": %lld, \"points\": [",
               widths_text(o.widths).c_str(), job.ranks, static_cast<long long>(o.batch_size),
               static_cast<long long>(job.train_examples),
               static_cast<long long>(job.test_examples), display_name(o.compressor).c_str(),
               uses_ratio(o.compressor) ? o.ratio : 0.0, o.error_feedback.c_str(),
               used.error_feedback.c_str(), static_cast<unsigned long long>(o.seed), o.lr,
               o.momentum, used.lr, used.momentum, target, r.reached ? "true" : "false",
               r.ranks_agree ? "true" : "false", static_cast<long long>(r.steps_per_epoch));
  for (size_t i = 0; i < r.points.size(); ++i) {
    const AccuracyPoint& p = r.points[i];
    std::fprintf(out,
                 "%s{\"step\": %lld, \"seconds\": %.4f, \"test_accuracy\": %.6f, "
                 "\"train_loss\": %.6f, \"bytes_per_step\": %.1f}",
                 i ? ", " : "", static_cast<long long>(p.step), p.seconds, p.test_accuracy,
                 p.train_loss, p.bytes_per_step);
  }
  std::fprintf(out, "]}\n");
  std::fflush(out);
}

}  // namespace fmnist
