// 02_robust_shifted_objective: the synthetic benchmark of the ARC-Top-K reference code, run
// through arcreduce with one real rank per node (docs/design/robust-shifted-objective.md).
//
// Every rank computes the gradient of its own local loss for a [200, 10] parameter tensor (plus
// N(0, 0.001^2) noise per coordinate from a per-rank generator), hands it to allreduce_async
// (op average) with the chosen compressor and ef21m error feedback, and takes a step
// w -= 0.002 * output. The output is the same on every rank, so every rank holds the same w.
// Each compressor setting runs once per seed, each run in a freshly initialised runtime (the
// sketch rank is a job-wide setting). Rank 0 prints progress, a table of ||w_t - w*|| and
// optionally writes a CSV and a plot. --check runs without noise and verifies the trajectory.
// Exit status: 0 success, 1 a failed op or check, 2 a bad command line or configuration.
//
//   mpirun -np 10 ./robust_shifted_objective --seeds 1,2,3 --csv rso.csv --plot rso.png
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <arcreduce/arcreduce.h>
#include <CLI/CLI.hpp>

#include "problem.h"
#include "report.h"

namespace {

constexpr double kLearningRate = 0.002;
constexpr double kNoiseStd = 0.001;
// Defaults of the spec's run; --ratio, --error-feedback, --eta and --ef-init vary them.
constexpr double kRatio = 0.05;  // k = 10 of the 200 rows
constexpr double kEfMomentum = 0.5;
constexpr char kTensorName[] = "robust_shifted_objective.w";

// Deterministic check (noise off): the uncompressed run and both ARC-Top-K variants follow the
// same trajectory, because the mean gradient is non-zero on the signal row only.
constexpr int kCheckStep = 100;
constexpr double kCheckDistance = 0.221476154;
constexpr double kCheckRelativeTolerance = 1e-6;
constexpr int kFinalStep = 1000;
constexpr double kFinalDistanceBound = 1e-10;

struct Variant {
  const char* name;            // command-line, table and CSV name
  const char* reference_name;  // the reference code's name
  const char* compressor;      // Config::compressor
  const char* granularity;     // Config::granularity (topk and randk select rows)
  int sketch_rank;             // Config::sketch_rank; 0 keeps the default (not used)
  bool checkable;              // noise-free trajectory known exactly (--check)
  int powersgd_rank = 0;       // Config::powersgd_rank; 0 keeps the default (not used)
};

// A sketch rank >= the row length (10) makes arctopk score rows exactly. Ok-Topk keeps the
// ratio as its density (100 of the 2000 entries, as many values as 10 rows); Ok-Topk and
// PowerSGD bring their own error feedback (--error-feedback does not apply to them).
constexpr Variant kVariants[] = {
    {"none", "uncompressed", "none", "element", 0, true},
    {"randk", "Random Block", "randk", "row", 0, false},
    {"topk", "Local TopK", "topk", "row", 0, false},
    {"arctopk-sketch", "ArcTopK-Sketch", "arctopk", "element", 2, true},
    {"arctopk-exact", "ArcTopK", "arctopk", "element", static_cast<int>(rso::kCols), true},
    {"oktopk", "Ok-Topk", "oktopk", "element", 0, false},
    {"powersgd", "PowerSGD q=1", "powersgd", "element", 0, false, 1},
    {"powersgd-q2", "PowerSGD q=2", "powersgd", "element", 0, false, 2},
};

const Variant* find_variant(const std::string& name) {
  for (const Variant& v : kVariants) {
    if (name == v.name) return &v;
  }
  return nullptr;
}

struct Options {
  int steps = 1000;
  std::vector<uint64_t> seeds = {1, 2, 3};
  std::vector<std::string> compressors = {"none",          "randk",  "topk",     "arctopk-sketch",
                                          "arctopk-exact", "oktopk", "powersgd", "powersgd-q2"};
  bool noise = true;
  bool check = false;
  double ratio = kRatio;
  std::string error_feedback = "ef21m";
  double eta = kEfMomentum;
  std::string ef_init = "zero";
  std::string csv;
  std::string plot;
};

// The benchmark's runtime settings over `base` (which carries the user's other ARCREDUCE_*
// knobs): ratio 0.05, ef21m with eta 0.5 from a cold start, no warm-up, no size threshold.
arcreduce::Config make_config(arcreduce::Config base, const Variant& v, uint64_t seed,
                              const Options& o) {
  base.compressor = v.compressor;
  base.granularity = v.granularity;
  // Each variant is the compressor it names, checked against its exact expected distance: no
  // automatic switch to dense (ARCREDUCE_AUTO_COMPRESS).
  base.auto_compress = false;
  if (v.sketch_rank > 0) base.sketch_rank = v.sketch_rank;
  if (v.powersgd_rank > 0) base.powersgd_rank = v.powersgd_rank;
  base.compress_ratio = o.ratio;
  base.error_feedback = o.error_feedback;
  base.ef_momentum = o.eta;
  base.ef_init = o.ef_init;
  base.warmup_steps = 0;
  base.min_compress_elements = 0;
  base.seed = seed;
  base.check_consistency = base.check_consistency || o.check;
  return base;
}

// Rank 0's progress lines: every tenth of a run, with the rate and the ETA of the whole job.
class Progress {
 public:
  Progress(bool print, int64_t total_steps) : print_(print), total_steps_(total_steps) {}

  void step(const char* name, uint64_t seed, int t, int steps, double distance) {
    ++done_steps_;
    const int every = steps >= 10 ? steps / 10 : 1;
    if (!print_ || (t % every != 0 && t != steps)) return;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = done_steps_ / seconds;
    std::printf("  %-15s seed %-3llu step %5d/%d  distance %.3e  %6.0f steps/s  ETA %.0f s\n", name,
                static_cast<unsigned long long>(seed), t, steps, distance, rate,
                (total_steps_ - done_steps_) / rate);
    std::fflush(stdout);
  }

 private:
  bool print_;
  int64_t total_steps_;
  int64_t done_steps_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

struct Run {
  std::vector<double> distances;  // after step t at t - 1
  double bytes_sent = 0;          // for the tensor, this rank
  uint64_t dense_reductions = 0;
  uint64_t reductions = 0;
  double rank_disagreement = 0;  // max |w - mean over ranks of w|: 0 when all ranks agree
};

// Largest difference between this rank's w and the mean of w over ranks (dense, exact path).
double rank_disagreement(const std::vector<double>& w) {
  std::vector<double> mean = w;
  arcreduce::AllreduceOptions dense;
  dense.compression.compressor = "none";
  dense.compression.error_feedback = "none";
  const arcreduce::Status s = arcreduce::allreduce(
      "robust_shifted_objective.agreement",
      arcreduce::Tensor{mean.data(), arcreduce::DType::kFloat64, {rso::kRows, rso::kCols}}, dense);
  if (!s.ok()) throw std::runtime_error("agreement check failed: " + s.message());
  double worst = 0;
  for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, std::abs(w[i] - mean[i]));
  return worst;
}

// One run in an initialised runtime: `steps` steps from w0 = 0. Throws on a failed op.
Run run(const Variant& v, uint64_t seed, const Options& options, Progress& progress) {
  const int rank = arcreduce::rank();
  const rso::LocalObjective objective = rso::local_objective(rank, arcreduce::size());
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(rank)};
  std::mt19937_64 engine(seq);
  std::normal_distribution<double> noise(0.0, kNoiseStd);

  Run result;
  std::vector<double> w(rso::kElements, 0.0), grad;
  // The runtime's "none" is a plain dense mean without error feedback. The reference runs its
  // uncompressed baseline through the same EF21-MSGD optimizer, which with the identity
  // compressor is momentum on the mean gradient: apply that momentum here (cold start, like the
  // compressed runs' ef21m), so every setting uses the same optimizer.
  // efm keeps the same momentum inside the runtime as a sum, u = (1 - eta) u + g = v / eta: its
  // steps are scaled by eta, so that at ratio 1 it is this very optimizer.
  const bool momentum_feedback =
      options.error_feedback == "ef21m" || options.error_feedback == "efm";
  const bool client_momentum = std::string(v.compressor) == "none" && momentum_feedback;
  const double eta = options.eta;
  const double step_scale =
      std::string(v.compressor) != "none" && options.error_feedback == "efm" ? eta : 1.0;
  std::vector<double> momentum(rso::kElements, 0.0);
  for (int t = 1; t <= options.steps; ++t) {
    rso::local_gradient(objective, w, grad);
    if (options.noise) {
      for (double& g : grad) g += noise(engine);
    }
    const arcreduce::Handle handle = arcreduce::allreduce_async(
        kTensorName,
        arcreduce::Tensor{grad.data(), arcreduce::DType::kFloat64, {rso::kRows, rso::kCols}});
    const arcreduce::Status status = arcreduce::synchronize(handle);
    if (!status.ok()) {
      throw std::runtime_error("step " + std::to_string(t) + ": " +
                               arcreduce::status_code_name(status.code()) + ": " +
                               status.message());
    }
    if (client_momentum) {
      for (int64_t i = 0; i < rso::kElements; ++i) {
        momentum[i] = (1 - eta) * momentum[i] + eta * grad[i];
        grad[i] = momentum[i];
      }
    }
    for (int64_t i = 0; i < rso::kElements; ++i) w[i] -= kLearningRate * step_scale * grad[i];
    result.distances.push_back(rso::distance_to_optimum(w));
    progress.step(v.name, seed, t, options.steps, result.distances.back());
  }
  const arcreduce::Stats stats = arcreduce::stats();
  const auto it = stats.compressors.find(v.compressor);
  if (it != stats.compressors.end()) {
    result.bytes_sent = static_cast<double>(it->second.bytes_sent);
    result.dense_reductions = it->second.dense_fallbacks;
    result.reductions = it->second.tensors;
  }
  result.rank_disagreement = rank_disagreement(w);
  return result;
}

// The --check verdicts of one run; prints each failure. Returns the number of failures.
int check_run(const Variant& v, uint64_t seed, const Run& r, int steps) {
  int failures = 0;
  const std::string who = std::string(v.name) + " (seed " + std::to_string(seed) + ")";
  const double d = r.distances[kCheckStep - 1];
  const double relative = std::abs(d - kCheckDistance) / kCheckDistance;
  if (!(relative <= kCheckRelativeTolerance)) {
    ++failures;
    std::printf(
        "check FAILED: %s: distance after %d steps is %.9f, expected %.9f (relative "
        "error %.2e > %.0e)\n",
        who.c_str(), kCheckStep, d, kCheckDistance, relative, kCheckRelativeTolerance);
  }
  if (steps >= kFinalStep && !(r.distances[kFinalStep - 1] < kFinalDistanceBound)) {
    ++failures;
    std::printf("check FAILED: %s: distance after %d steps is %.3e, expected < %.0e\n", who.c_str(),
                kFinalStep, r.distances[kFinalStep - 1], kFinalDistanceBound);
  }
  if (!(r.rank_disagreement <= 1e-12)) {
    ++failures;
    std::printf("check FAILED: %s: ranks hold different parameters (max difference %.3e)\n",
                who.c_str(), r.rank_disagreement);
  }
  if (failures > 0 && r.dense_reductions > 0) {
    std::printf("  note: the runtime reduced %llu of %llu steps densely (%s not active)\n",
                static_cast<unsigned long long>(r.dense_reductions),
                static_cast<unsigned long long>(r.reductions), v.compressor);
  }
  return failures;
}

std::string seed_list(const Options& o) {
  std::string seeds;
  for (uint64_t s : o.seeds) seeds += (seeds.empty() ? "" : ",") + std::to_string(s);
  return seeds;
}

std::string describe_job(const Options& o, int size) {
  char text[320];
  std::snprintf(text, sizeof(text),
                "robust shifted objective: %d ranks, [%lld, %lld] fp64, %d steps, lr %.3g, ratio "
                "%.2f, %s eta %.2g %s start, %s, seeds %s",
                size, static_cast<long long>(rso::kRows), static_cast<long long>(rso::kCols),
                o.steps, kLearningRate, o.ratio, o.error_feedback.c_str(), o.eta,
                o.ef_init == "zero" ? "cold" : "warm", o.noise ? "noise N(0, 0.001^2)" : "no noise",
                seed_list(o).c_str());
  return text;
}

// describe_job() short enough for the plot's title line.
std::string plot_title(const Options& o, int size) {
  char settings[96];
  std::snprintf(settings, sizeof(settings), "ratio %.2g, %s (eta %.2g, %s), ", o.ratio,
                o.error_feedback.c_str(), o.eta, o.ef_init == "zero" ? "cold" : "warm");
  return "robust shifted objective, " + std::to_string(size) + " ranks, " + settings +
         (o.noise ? "noise 1e-3" : "no noise") + ", seeds " + seed_list(o);
}

// Runs every setting for every seed; returns rank 0's results (other ranks: empty distances).
// Adds --check failures to `check_failures`; sets `size` to the number of ranks.
std::vector<rso::Result> run_all(const arcreduce::Config& base, const Options& o,
                                 int* check_failures, int* size) {
  std::vector<rso::Result> results;
  std::optional<Progress> progress;  // created once the first runtime knows the rank
  for (const std::string& name : o.compressors) {
    const Variant& v = *find_variant(name);
    rso::Result result{v.name, v.reference_name, o.seeds, {}, 0, 0, 0};
    for (uint64_t seed : o.seeds) {
      arcreduce::init(make_config(base, v, seed, o));
      const bool lead = arcreduce::rank() == 0;
      if (!progress) {
        *size = arcreduce::size();
        if (*size % 2 != 0) {
          arcreduce::shutdown();
          throw arcreduce::Error("the objective needs an even number of ranks (10 in the spec)");
        }
        if (lead) std::printf("%s\n", describe_job(o, *size).c_str());
        const int64_t runs = static_cast<int64_t>(o.compressors.size() * o.seeds.size());
        progress.emplace(lead, runs * o.steps);
      }
      const Run r = run(v, seed, o, *progress);
      arcreduce::shutdown();
      if (!lead) continue;
      if (r.rank_disagreement > 1e-12) {
        std::printf("  warning: %s seed %llu: ranks' parameters differ by up to %.3e\n", v.name,
                    static_cast<unsigned long long>(seed), r.rank_disagreement);
      }
      if (o.check) *check_failures += check_run(v, seed, r, o.steps);
      result.distances.push_back(r.distances);
      result.bytes_sent_per_step += r.bytes_sent / o.steps / o.seeds.size();
      result.dense_reductions += r.dense_reductions;
      result.reductions += r.reductions;
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> names;
  for (const Variant& v : kVariants) names.push_back(v.name);
  CLI::App app("The ARC-Top-K reference's robust shifted objective, one rank per node.");
  app.add_option("--steps", o.steps, "steps per run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI::Option* seeds_option = app.add_option("--seeds", o.seeds,
                                             "noise seeds, also ARCREDUCE_SEED (default 1,2,3; "
                                             "--check: 1)")
                                  ->delimiter(',');
  CLI::Option* compressors_option =
      app.add_option("--compressors", o.compressors,
                     "settings to run (default: all; --check: none,arctopk-exact,arctopk-sketch)")
          ->delimiter(',')
          ->check(CLI::IsMember(names));
  app.add_flag(
      "--no-noise", [&o](int64_t) { o.noise = false; }, "switch the gradient noise off");
  app.add_flag("--check", o.check,
               "no noise; verify distance 0.221476154 after 100 steps and < 1e-10 after 1000");
  app.add_option("--ratio", o.ratio, "fraction of rows kept (spec: 0.05)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--error-feedback", o.error_feedback, "none, ef14, ef21, ef21m, efm (spec: ef21m)")
      ->check(CLI::IsMember({"none", "ef14", "ef21", "ef21m", "efm"}));
  app.add_option("--eta", o.eta, "ef21m and efm momentum eta (spec: 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--ef-init", o.ef_init, "zero (cold, spec) or warm")
      ->check(CLI::IsMember({"zero", "warm"}));
  app.add_option("--csv", o.csv, "write compressor,seed,step,distance for every step here");
  app.add_option("--plot", o.plot, "draw log distance vs step into this PNG (needs gnuplot)");
  CLI11_PARSE(app, argc, argv);
  if (o.check) {
    o.noise = false;
    if (seeds_option->count() == 0) o.seeds = {1};
    if (compressors_option->count() == 0)
      o.compressors = {"none", "arctopk-exact", "arctopk-sketch"};
    for (const std::string& name : o.compressors) {
      if (!find_variant(name)->checkable) {
        std::fprintf(stderr,
                     "robust_shifted_objective: --check cannot verify %s (its noise-free "
                     "trajectory depends on ties)\n",
                     name.c_str());
        return 2;
      }
    }
    if (o.steps < kCheckStep) {
      std::fprintf(stderr, "robust_shifted_objective: --check needs --steps >= %d\n", kCheckStep);
      return 2;
    }
  }

  int check_failures = 0, size = 0;
  std::vector<rso::Result> results;
  try {
    results = run_all(arcreduce::Config::from_env(), o, &check_failures, &size);
  } catch (const arcreduce::Error& e) {
    std::fprintf(stderr, "robust_shifted_objective: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "robust_shifted_objective: %s\n", e.what());
    arcreduce::shutdown();
    return 1;
  }
  if (results.empty() || results[0].distances.empty()) return 0;  // not rank 0

  rso::print_table(results, o.steps, stdout);
  int status = 0;
  if (!o.csv.empty()) {
    const std::string error = rso::write_csv(results, o.csv);
    std::printf("csv: %s\n", error.empty() ? o.csv.c_str() : error.c_str());
    if (!error.empty()) status = 1;
  }
  if (!o.plot.empty()) {
    const std::string error = rso::write_plot(results, plot_title(o, size), o.plot);
    if (error.empty()) {
      std::printf("plot: %s\n", o.plot.c_str());
    } else {
      std::printf("plot: NOT written: %s%s\n", error.c_str(),
                  o.csv.empty() ? "" : "; the CSV has the data");
    }
  }
  if (o.check) {
    std::printf("check %s: %zu setting(s) x %zu seed(s), %d failure(s)\n",
                check_failures ? "FAILED" : "passed", o.compressors.size(), o.seeds.size(),
                check_failures);
    if (check_failures) status = 1;
  }
  return status;
}
