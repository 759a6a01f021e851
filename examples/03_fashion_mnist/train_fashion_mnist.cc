// 03_fashion_mnist: data-parallel training of an MLP on Fashion-MNIST with arcreduce.
//
// Every rank holds the whole model and a shard of every global batch. Backward hands each
// layer's gradient to arcreduce::allreduce_async as soon as it is computed and waits only
// before the SGD step, so communication overlaps the rest of backward. Rank 0 prints one line
// per epoch and a summary (or, with --compare, a table over compressors); after training the
// program measures how much of the communication backward hides. Exit status: 0 success, 1 a
// failed run (data, checkpoint, reduction, ranks disagreeing), 2 a bad command line or
// configuration.
//
//   mpirun -np 4 ./train_fashion_mnist --epochs 3 --csv fmnist.csv --plot fmnist.png
//   mpirun -np 4 ./train_fashion_mnist --compare --epochs 2
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <arcreduce/arcreduce.h>
#include <CLI/CLI.hpp>

#include "checkpoint.h"
#include "collective.h"
#include "dataset.h"
#include "idx_file.h"
#include "optimizer_pairing.h"
#include "report.h"
#include "trainer.h"

namespace {

using fmnist::RunResult;

const std::vector<std::string> kCompressors = {"dense", "none",    "fp16",   "topk",
                                               "randk", "arctopk", "oktopk", "powersgd"};

struct Options {
  fmnist::TrainOptions train;
  std::vector<int64_t> hidden = {1024, 1024};
  std::string data_dir = fmnist::kDefaultDataDir;
  int64_t train_samples = 60000;
  int64_t test_samples = 10000;
  bool compare = false;
  std::vector<std::string> compare_list = {"dense",   "topk",   "randk",
                                           "arctopk", "oktopk", "powersgd"};
  std::string csv;
  std::string plot;
  fmnist::StepBenchOptions bench;
  int step_bench = 0;  // > 0: time this many training steps (bench/e2e) instead of training
  bool tta = false;    // train to a target accuracy instead of by epochs (bench/tta)
  fmnist::TimeToAccuracyOptions tta_options;
  double target_percent = 0;
};

std::string runtime_name(const std::string& compressor) {
  return compressor == "dense" ? "none" : compressor;
}

// "final:" line that the resume test compares between runs (exact loss and model hash).
void print_final(const RunResult& r) {
  if (!r.skipped.empty()) return;
  std::printf("final: %s epoch %lld step %lld loss %a model %016llx\n",
              fmnist::display_name(r.compressor).c_str(),
              static_cast<long long>(r.first_epoch - 1 + static_cast<int64_t>(r.epochs.size())),
              static_cast<long long>(r.global_step),
              r.epochs.empty() ? 0.0 : r.epochs.back().train_loss,
              static_cast<unsigned long long>(r.weights_hash));
  std::fflush(stdout);
}

// Initialises the runtime with the environment's settings and `train`'s compressor, ratio and
// seed, and pairs error feedback with the SGD (optimizer_pairing.h: `train` then holds what
// the SGD and the submissions use); prints the error and returns false when init() refuses them.
bool init_runtime(const arcreduce::Config& env, fmnist::TrainOptions& train) {
  arcreduce::Config config = env;
  config.compressor = train.compressor;
  config.compress_ratio = train.ratio;
  config.seed = train.seed;
  const fmnist::OptimizerPairing pairing = fmnist::pair_optimizer(train, config);
  train.lr = pairing.lr;
  train.momentum = pairing.momentum;
  train.error_feedback = pairing.error_feedback;
  config.ef_momentum = pairing.ef_momentum;
  config.ef_init = pairing.ef_init;
  try {
    arcreduce::init(config);
  } catch (const arcreduce::Error& e) {
    std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
    return false;
  }
  if (!pairing.note.empty() && arcreduce::rank() == 0) std::printf("%s\n", pairing.note.c_str());
  return true;
}

// Trains every requested compressor, each in a freshly initialised runtime. Returns the exit
// status; fills `runs` on rank 0 only.
int run_all(const fmnist::Dataset& data, const arcreduce::Config& env, const Options& o,
            std::vector<RunResult>& runs, fmnist::JobDescription& job) {
  const std::vector<std::string> list =
      o.compare ? o.compare_list : std::vector<std::string>{o.train.compressor};
  fmnist::ProgressPrinter progress(false, 0);
  bool first = true;
  for (const std::string& name : list) {
    fmnist::TrainOptions train = o.train;
    train.compressor = runtime_name(name);
    if (!init_runtime(env, train)) return 2;
    const bool lead = arcreduce::rank() == 0;
    if (first) {
      first = false;
      job.ranks = arcreduce::size();
      job.train_examples = data.train.count;
      job.test_examples = data.test.count;
      job.options = o.train;
      job.parameters = fmnist::Mlp(o.train.widths, 0).parameter_count();
      progress = fmnist::ProgressPrinter(lead, static_cast<int64_t>(list.size()) * o.train.epochs);
      if (lead) std::printf("%s\n", fmnist::describe(job).c_str());
    }
    RunResult result;
    result.compressor = train.compressor;
    try {
      result = fmnist::train(data, train, [&](const fmnist::EpochResult& r) {
        progress.epoch(train.compressor, train.epochs, r);
      });
      progress.drop(train.epochs - (result.first_epoch - 1) -
                    static_cast<int64_t>(result.epochs.size()));
    } catch (const fmnist::CompressorUnavailable& e) {
      arcreduce::shutdown();
      if (!o.compare) {
        if (lead) std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
        return 1;
      }
      result.skipped = e.what();
      progress.drop(train.epochs);
      if (lead) {
        std::printf("%s: skipped (%s)\n", name.c_str(), e.what());
        runs.push_back(result);
      }
      continue;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "train_fashion_mnist: rank %d: %s\n", arcreduce::rank(), e.what());
      arcreduce::shutdown();
      return 1;
    }
    arcreduce::shutdown();
    if (!result.ranks_agree) {
      if (lead) std::fprintf(stderr, "train_fashion_mnist: ranks hold different models\n");
      return 1;
    }
    if (lead) {
      print_final(result);
      runs.push_back(result);
    }
  }
  return 0;
}

// --step-bench: warm-up and timed steps in one runtime, then rank 0 prints one JSON line.
int run_step_bench(const fmnist::Dataset& data, const arcreduce::Config& env, const Options& o) {
  fmnist::TrainOptions train = o.train;
  train.compressor = runtime_name(train.compressor);
  if (!init_runtime(env, train)) return 2;
  fmnist::StepBenchOptions bench = o.bench;
  bench.steps = o.step_bench;
  int status = 0;
  try {
    const fmnist::StepBenchResult r = fmnist::benchmark_steps(data, train, bench);
    if (arcreduce::rank() == 0) {
      fmnist::JobDescription job;
      job.ranks = arcreduce::size();
      job.options = train;
      fmnist::print_step_bench_json(r, job, bench.communicate, stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_fashion_mnist: rank %d: %s\n", arcreduce::rank(), e.what());
    status = 1;
  }
  arcreduce::shutdown();
  return status;
}

// --tta: trains until the target accuracy or --max-steps, prints a progress line per evaluation
// and, on rank 0, one JSON line with the curve.
int run_time_to_accuracy(const fmnist::Dataset& data, const arcreduce::Config& env,
                         const Options& o) {
  fmnist::TrainOptions train = o.train;
  train.compressor = runtime_name(train.compressor);
  if (!init_runtime(env, train)) return 2;
  fmnist::TimeToAccuracyOptions tta = o.tta_options;
  tta.target = o.target_percent / 100.0;
  const bool lead = arcreduce::rank() == 0;
  int status = 0;
  try {
    const fmnist::TimeToAccuracyResult r =
        fmnist::train_to_accuracy(data, train, tta, [&](const fmnist::AccuracyPoint& p) {
          if (!lead || p.step == 0) return;
          const double rate = p.seconds > 0 ? static_cast<double>(p.step) / p.seconds : 0;
          const double eta = rate > 0 ? static_cast<double>(tta.max_steps - p.step) / rate : 0;
          std::printf(
              "step %lld/%lld  %s  loss %.4f  test acc %6.2f%%  train %.1f s  %.1f steps/s"
              "  sent %.1f KB/step  ETA at most %.0f s\n",
              static_cast<long long>(p.step), static_cast<long long>(tta.max_steps),
              fmnist::display_name(train.compressor).c_str(), p.train_loss, 100 * p.test_accuracy,
              p.seconds, rate, p.bytes_per_step / 1e3, eta);
          std::fflush(stdout);
        });
    if (!r.ranks_agree) {
      if (lead) std::fprintf(stderr, "train_fashion_mnist: ranks hold different models\n");
      status = 1;
    }
    if (lead) {
      fmnist::JobDescription job;
      job.ranks = arcreduce::size();
      job.train_examples = data.train.count;
      job.test_examples = data.test.count;
      job.options = o.train;
      fmnist::print_tta_json(r, job, train, tta.target, stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_fashion_mnist: rank %d: %s\n", arcreduce::rank(), e.what());
    status = 1;
  }
  arcreduce::shutdown();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  arcreduce::Config env;
  try {
    env = arcreduce::Config::from_env();
  } catch (const arcreduce::Error& e) {
    std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
    return 2;
  }
  Options o;
  o.train.compressor = env.compressor == "none" ? "dense" : env.compressor;
  o.train.ratio = env.compress_ratio;
  o.train.seed = env.seed;
  o.train.error_feedback = env.error_feedback;

  CLI::App app("Data-parallel training of an MLP on Fashion-MNIST through arcreduce.");
  app.add_option("--compressor", o.train.compressor,
                 "gradient compressor: dense (= none), fp16, topk, randk, arctopk, oktopk, "
                 "powersgd (default: ARCREDUCE_COMPRESSOR)")
      ->check(CLI::IsMember(kCompressors))
      ->capture_default_str();
  app.add_option("--compress-ratio", o.train.ratio,
                 "fraction of gradient entries kept (default: ARCREDUCE_COMPRESS_RATIO)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--error-feedback", o.train.error_feedback,
                 "none, ef14, ef21, ef21m, for topk, randk, arctopk (default: "
                 "ARCREDUCE_ERROR_FEEDBACK)")
      ->check(CLI::IsMember({"none", "ef14", "ef21", "ef21m", "efm"}))
      ->capture_default_str();
  app.add_option("--epochs", o.train.epochs, "epochs to train (resumed ones included)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", o.train.batch_size, "examples per rank per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", o.train.seed,
                 "model initialisation, shuffling and the runtime's shared randomness "
                 "(default: ARCREDUCE_SEED)")
      ->capture_default_str();
  app.add_option("--lr", o.train.lr, "SGD learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--momentum", o.train.momentum, "SGD momentum")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--hidden", o.hidden, "hidden layer widths")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "directory of the Fashion-MNIST IDX files")
      ->capture_default_str();
  app.add_option("--train-samples", o.train_samples,
                 "use the first N training examples (all: 60000)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--test-samples", o.test_samples, "evaluate on the first N test examples")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--checkpoint", o.train.checkpoint,
                 "checkpoint prefix: PATH.rank<r>.ckpt and PATH.rank<r>.arcreduce, written "
                 "after the last epoch");
  app.add_flag("--checkpoint-every-epoch", o.train.checkpoint_every_epoch,
               "also write the checkpoint after every epoch");
  app.add_option("--resume", o.train.resume, "continue from this checkpoint prefix");
  app.add_option("--overlap-steps", o.train.overlap_steps,
                 "steps of the overlap measurement after training (0: skip)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--compare", o.compare,
               "train once per compressor of --compare-list at the same ratio and print a table");
  app.add_option("--compare-list", o.compare_list, "compressors of --compare")
      ->delimiter(',')
      ->check(CLI::IsMember(kCompressors))
      ->capture_default_str();
  app.add_option("--csv", o.csv, "write one row per epoch (and compressor) here");
  app.add_option("--plot", o.plot, "draw loss and accuracy per epoch into this PNG (gnuplot)");
  app.add_option("--step-bench", o.step_bench,
                 "time N training steps after the warm-up and print one JSON line instead of "
                 "training (bench/e2e; 0: train)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--link-counters", o.bench.link_interface,
                 "with --step-bench: also count the bytes this network interface of rank 0's host "
                 "carries over the timed steps (e.g. eth0)");
  app.add_option("--step-bench-warmup", o.bench.warmup, "untimed steps before --step-bench's")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--step-bench-budget", o.bench.budget,
                 "seconds: time fewer steps (at least 10) when the warm-up says N would take "
                 "longer (0: always N)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--tta", o.tta,
               "time to accuracy: train until --target-accuracy or --max-steps, evaluating "
               "every --eval-every steps, and print one JSON line (bench/tta)");
  app.add_option("--target-accuracy", o.target_percent,
                 "with --tta: stop at this test accuracy in percent (0: run --max-steps)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--max-steps", o.tta_options.max_steps, "with --tta: optimizer steps at most")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--eval-every", o.tta_options.eval_every, "with --tta: steps between evaluations")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bool no_communication = false;
  app.add_flag("--no-communication", no_communication,
               "with --step-bench: submit nothing to the runtime (the compute floor)");
  CLI11_PARSE(app, argc, argv);
  // A compression chosen on the command line (other than the configuration's) is obeyed as
  // ARCREDUCE_COMPRESSOR's would be: ARCREDUCE_AUTO_COMPRESS then applies only where it is set
  // itself. `--compressor arctopk` alone names the default, which stays automatic.
  const std::string configured = env.compressor == "none" ? "dense" : env.compressor;
  const bool chosen = o.train.compressor != configured || o.train.ratio != env.compress_ratio ||
                      o.train.error_feedback != env.error_feedback || o.compare;
  if (chosen && !std::getenv("ARCREDUCE_AUTO_COMPRESS")) env.auto_compress = false;
  o.bench.communicate = !no_communication;
  if (no_communication && o.step_bench == 0) {
    std::fprintf(stderr, "train_fashion_mnist: --no-communication needs --step-bench\n");
    return 2;
  }
  if (o.step_bench > 0 && (o.compare || !o.train.checkpoint.empty() || !o.train.resume.empty())) {
    std::fprintf(stderr,
                 "train_fashion_mnist: --step-bench does not compare, checkpoint or resume\n");
    return 2;
  }
  if (o.tta && (o.step_bench > 0 || o.compare || !o.train.checkpoint.empty() ||
                !o.train.resume.empty() || o.tta_options.max_steps <= 0)) {
    std::fprintf(stderr,
                 "train_fashion_mnist: --tta needs --max-steps and does not step-bench, compare, "
                 "checkpoint or resume\n");
    return 2;
  }
  if (o.compare && (!o.train.checkpoint.empty() || !o.train.resume.empty())) {
    std::fprintf(stderr, "train_fashion_mnist: --compare does not checkpoint or resume\n");
    return 2;
  }
  o.train.widths = {fmnist::kImagePixels};
  for (int64_t h : o.hidden) o.train.widths.push_back(h);
  o.train.widths.push_back(fmnist::kClasses);

  // Before arcreduce::init: a rank that cannot read the data exits, and mpirun ends the job.
  fmnist::Dataset data;
  try {
    data = fmnist::load_fashion_mnist(o.data_dir, o.train_samples, o.test_samples);
  } catch (const fmnist::DataError& e) {
    std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
    return 1;
  }

  if (o.step_bench > 0) return run_step_bench(data, env, o);
  if (o.tta) return run_time_to_accuracy(data, env, o);

  std::vector<RunResult> runs;
  fmnist::JobDescription job;
  const int status = run_all(data, env, o, runs, job);
  if (status != 0 || runs.empty()) return status;  // failed, or not rank 0

  if (o.compare) {
    fmnist::print_compare_table(runs, job, stdout);
  } else {
    fmnist::print_summary(runs[0], job, stdout);
  }
  int exit_status = 0;
  if (!o.csv.empty()) {
    const std::string error = fmnist::write_csv(runs, job, o.csv);
    std::printf("csv: %s\n", error.empty() ? o.csv.c_str() : error.c_str());
    if (!error.empty()) exit_status = 1;
  }
  if (!o.plot.empty()) {
    const std::string title = fmnist::plot_title(job);
    const std::string error = fmnist::write_plot(runs, title, o.plot);
    std::printf("plot: %s\n", error.empty() ? o.plot.c_str() : ("NOT written: " + error).c_str());
  }
  return exit_status;
}
