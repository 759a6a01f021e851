#include "trainer.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <stdexcept>

#include <arcreduce/arcreduce.h>

#include "checkpoint.h"
#include "collective.h"
#include "mlp.h"
#include "sgd.h"

namespace fmnist {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Every rank's `own` (the same length on every rank), rank r's at [r * own.size(), ...): one
// exact sum in which each rank fills its own slice. Collective.
std::vector<double> from_every_rank(const std::string& name, const std::vector<double>& own,
                                    int rank, int size) {
  std::vector<double> all(own.size() * static_cast<size_t>(size), 0.0);
  std::copy(own.begin(), own.end(), all.begin() + static_cast<std::ptrdiff_t>(own.size() * rank));
  sum_over_ranks(name, all);
  return all;
}

// Shuffling has its own generator (saved in checkpoints); the model's comes from the same seed.
std::mt19937_64 shuffle_engine(uint64_t seed) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), 0x73687566u};
  return std::mt19937_64(seq);
}

// Everything one run needs, built once.
struct Run {
  Run(const Dataset& d, const TrainOptions& o)
      : data(d),
        options(o),
        rank(arcreduce::rank()),
        size(arcreduce::size()),
        model(o.widths, o.seed),
        sgd(model.parameters(), o.lr, o.momentum),
        shuffle(shuffle_engine(o.seed)),
        sharder(d.train.count, o.batch_size, rank, size),
        exchange(o.compressor, o.ratio, o.error_feedback) {}

  // One training step on this rank's share of global batch `step`: every gradient goes to
  // arcreduce as backward produces it; the wait is just before the optimizer step.
  double train_step(int64_t step) {
    gather_batch(data.train, sharder.batch(step), options.batch_size, x, y);
    const double loss = model.forward(x.data(), y.data(), options.batch_size);
    std::vector<Parameter>& params = model.parameters();
    model.backward([&](size_t i) { exchange.submit(params[i]); });
    exchange.wait();
    sgd.step(params);
    return loss;
  }

  // Test examples i with i % size == rank; returns the number classified correctly.
  int64_t evaluate_shard(int64_t* tested) {
    constexpr int64_t kChunk = 500;
    std::vector<int64_t> indices;
    int64_t correct = 0;
    for (int64_t first = rank; first < data.test.count; first += kChunk * size) {
      indices.clear();
      for (int64_t i = first; i < data.test.count && indices.size() < kChunk; i += size)
        indices.push_back(i);
      gather_batch(data.test, indices.data(), static_cast<int64_t>(indices.size()), x, y);
      correct += model.count_correct(x.data(), y.data(), static_cast<int64_t>(indices.size()));
      *tested += static_cast<int64_t>(indices.size());
    }
    return correct;
  }

  RunSettings settings() const {
    return {rank,
            size,
            options.seed,
            options.batch_size,
            data.train.count,
            options.widths,
            options.compressor,
            options.ratio,
            options.error_feedback,
            options.lr,
            options.momentum};
  }

  EpochResult train_epoch(int64_t epoch, TrainingProgress& progress) {
    const Clock::time_point start = Clock::now();
    sharder.shuffle(shuffle);
    const uint64_t bytes_before = arcreduce::stats().bytes_sent;
    double loss_sum = 0;
    for (int64_t step = 0; step < sharder.steps_per_epoch(); ++step) {
      loss_sum += train_step(step);
      ++progress.global_step;
    }
    const double train_seconds = seconds_since(start);
    const uint64_t bytes = arcreduce::stats().bytes_sent - bytes_before;
    int64_t tested = 0;
    const int64_t correct = evaluate_shard(&tested);
    std::vector<double> metrics{loss_sum, static_cast<double>(sharder.steps_per_epoch()),
                                static_cast<double>(correct), static_cast<double>(tested)};
    sum_over_ranks("fashion_mnist.metrics", metrics);
    progress.epochs_done = epoch;

    EpochResult r;
    r.epoch = epoch;
    r.train_loss = metrics[0] / metrics[1];
    r.test_accuracy = metrics[3] > 0 ? metrics[2] / metrics[3] : 0;
    r.step_seconds = train_seconds / static_cast<double>(sharder.steps_per_epoch());
    r.bytes_per_step = static_cast<double>(bytes) / static_cast<double>(sharder.steps_per_epoch());
    r.seconds = seconds_since(start);
    return r;
  }

  // Interleaves compute-only, communication-only and overlapped steps (after a barrier each)
  // on the current epoch's batches, without optimizer steps: the model does not change.
  OverlapResult measure_overlap(int steps) {
    std::vector<Parameter>& params = model.parameters();
    std::vector<double> compute, communication, overlapped;
    for (int s = 0; s < steps; ++s) {
      gather_batch(data.train, sharder.batch(s % sharder.steps_per_epoch()), options.batch_size, x,
                   y);
      barrier();
      Clock::time_point t = Clock::now();
      model.forward(x.data(), y.data(), options.batch_size);
      model.backward([](size_t) {});
      compute.push_back(seconds_since(t));

      barrier();
      t = Clock::now();
      for (size_t layer = params.size() / 2; layer-- > 0;) {  // backward's order
        exchange.submit(params[2 * layer]);
        exchange.submit(params[2 * layer + 1]);
      }
      exchange.wait();
      communication.push_back(seconds_since(t));

      barrier();
      t = Clock::now();
      model.forward(x.data(), y.data(), options.batch_size);
      model.backward([&](size_t i) { exchange.submit(params[i]); });
      exchange.wait();
      overlapped.push_back(seconds_since(t));
    }
    std::vector<double> own = compute;  // this rank's phases one after the other
    own.insert(own.end(), communication.begin(), communication.end());
    own.insert(own.end(), overlapped.begin(), overlapped.end());
    const std::vector<double> all = from_every_rank("fashion_mnist.overlap", own, rank, size);
    const size_t per_rank = own.size();
    double mean[3] = {0, 0, 0}, longest[3];
    for (size_t p = 0; p < 3; ++p) {
      std::vector<double> slowest(static_cast<size_t>(steps), 0.0);
      for (int r = 0; r < size; ++r) {
        const auto first = all.begin() + static_cast<std::ptrdiff_t>(per_rank * r + p * steps);
        mean[p] += median(std::vector<double>(first, first + steps)) / size;
        for (int s = 0; s < steps; ++s) slowest[s] = std::max(slowest[s], first[s]);
      }
      longest[p] = median(slowest);
    }
    OverlapResult r;
    r.steps = steps;
    r.mean_over_ranks = {mean[0], mean[1], mean[2]};
    r.longest_rank = {longest[0], longest[1], longest[2]};
    return r;
  }

  // The training step of train_step() on this rank's batch `step`, timed without gathering:
  // the whole step, and the part of it spent in exchange.wait() (communication not hidden).
  struct StepTime {
    double total = 0;
    double wait = 0;
  };
  StepTime timed_step(int64_t step, bool communicate) {
    gather_batch(data.train, sharder.batch(step % sharder.steps_per_epoch()), options.batch_size, x,
                 y);
    std::vector<Parameter>& params = model.parameters();
    const Clock::time_point start = Clock::now();
    StepTime t;
    model.forward(x.data(), y.data(), options.batch_size);
    if (communicate) {
      model.backward([&](size_t i) { exchange.submit(params[i]); });
      const Clock::time_point wait_start = Clock::now();
      exchange.wait();
      t.wait = seconds_since(wait_start);
    } else {
      model.backward([](size_t) {});
    }
    sgd.step(params);
    t.total = seconds_since(start);
    return t;
  }

  // True when every rank's model hash equals the others': per 16-bit chunk c of the hash,
  // size * sum(c^2) == (sum c)^2 exactly in fp64 holds only if all ranks' chunks are equal.
  bool ranks_agree(uint64_t hash) {
    std::vector<double> sums;
    for (int chunk = 0; chunk < 4; ++chunk) {
      const double c = static_cast<double>((hash >> (16 * chunk)) & 0xffff);
      sums.push_back(c);
      sums.push_back(c * c);
    }
    sum_over_ranks("fashion_mnist.agreement", sums);
    for (int chunk = 0; chunk < 4; ++chunk) {
      if (sums[2 * chunk + 1] * size != sums[2 * chunk] * sums[2 * chunk]) return false;
    }
    return true;
  }

  const Dataset& data;
  const TrainOptions& options;
  int rank, size;
  Mlp model;
  SgdMomentum sgd;
  std::mt19937_64 shuffle;
  Sharder sharder;
  GradientExchange exchange;
  std::vector<float> x;
  std::vector<int> y;
};

// The runtime counters the step benchmark reports (deltas over the timed steps).
struct Counters {
  uint64_t bytes_sent, collectives, negotiation_collectives;
  double coordinator_cpu_seconds;
  uint64_t held_steps;
  std::map<std::string, uint64_t> allreduce_calls, allreduce_bytes;
  std::map<std::string, uint64_t> collective_calls, collective_bytes;
  double link_latency_us, link_mbit_per_s;
  int hosts;
  bool hierarchical;
};

Counters read_counters() {
  const arcreduce::Stats s = arcreduce::stats();
  return {
      s.bytes_sent,       s.collectives,     s.negotiation_collectives, s.coordinator_cpu_seconds,
      s.held_steps,       s.allreduce_calls, s.allreduce_bytes,         s.collective_calls,
      s.collective_bytes, s.link_latency_us, s.link_mbit_per_s,         s.hosts,
      s.hierarchical};
}

// Bytes the network interface `name` received plus sent so far (Linux sysfs counters).
uint64_t interface_bytes(const std::string& name) {
  uint64_t total = 0;
  for (const char* way : {"rx_bytes", "tx_bytes"}) {
    const std::string path = "/sys/class/net/" + name + "/statistics/" + way;
    std::ifstream in(path);
    uint64_t value = 0;
    if (!(in >> value)) {
      throw std::runtime_error("--link-counters " + name + ": cannot read " + path);
    }
    total += value;
  }
  return total;
}

// after - before, entry by entry; entries that did not grow are left out.
std::map<std::string, uint64_t> grown(const std::map<std::string, uint64_t>& after,
                                      const std::map<std::string, uint64_t>& before) {
  std::map<std::string, uint64_t> delta;
  for (const auto& [name, value] : after) {
    const auto earlier = before.find(name);
    const uint64_t d = value - (earlier == before.end() ? 0 : earlier->second);
    if (d > 0) delta[name] = d;
  }
  return delta;
}

}  // namespace

double OverlapResult::hidden_fraction() const {
  const Phases& m = mean_over_ranks;
  if (m.communication_seconds <= 0) return 0;
  const double hidden =
      (m.compute_seconds + m.communication_seconds - m.step_seconds) / m.communication_seconds;
  return std::clamp(hidden, 0.0, 1.0);
}

RunResult train(const Dataset& data, const TrainOptions& options, const EpochCallback& on_epoch) {
  Run run(data, options);
  if (run.sharder.steps_per_epoch() == 0) {
    throw std::runtime_error("a global batch (--batch-size " + std::to_string(options.batch_size) +
                             " x " + std::to_string(run.size) + " ranks) is larger than the " +
                             std::to_string(data.train.count) + " training examples");
  }
  RunResult result;
  result.compressor = options.compressor;
  result.parameters = run.model.parameter_count();
  result.steps_per_epoch = run.sharder.steps_per_epoch();

  TrainingProgress progress;
  if (!options.resume.empty()) {
    load_checkpoint(options.resume, run.settings(), progress, run.shuffle, run.model, run.sgd);
  }
  result.first_epoch = progress.epochs_done + 1;
  for (int64_t epoch = progress.epochs_done + 1; epoch <= options.epochs; ++epoch) {
    const EpochResult r = run.train_epoch(epoch, progress);
    const bool last = epoch == options.epochs;
    if (!options.checkpoint.empty() && (last || options.checkpoint_every_epoch)) {
      save_checkpoint(options.checkpoint, run.settings(), progress, run.shuffle, run.model,
                      run.sgd);
    }
    result.epochs.push_back(r);
    on_epoch(r);
  }
  result.global_step = progress.global_step;
  result.weights_hash = model_hash(run.model);
  result.ranks_agree = run.ranks_agree(result.weights_hash);
  // After the checkpoint: the measurement advances compressor state but not the model.
  if (options.overlap_steps > 0) result.overlap = run.measure_overlap(options.overlap_steps);
  return result;
}

TimeToAccuracyResult train_to_accuracy(const Dataset& data, const TrainOptions& options,
                                       const TimeToAccuracyOptions& tta,
                                       const std::function<void(const AccuracyPoint&)>& on_point) {
  Run run(data, options);
  const int64_t per_epoch = run.sharder.steps_per_epoch();
  if (per_epoch == 0 || tta.eval_every <= 0 || tta.max_steps <= 0) {
    throw std::runtime_error(
        "time to accuracy needs a global batch within the training set, "
        "--eval-every > 0 and --max-steps > 0");
  }
  TimeToAccuracyResult result;
  result.steps_per_epoch = per_epoch;
  double training_seconds = 0, loss_sum = 0;
  int64_t losses = 0;
  uint64_t bytes_mark = arcreduce::stats().bytes_sent;
  int64_t step_mark = 0;
  // Evaluation is not training time: the clock stops for it, on every rank alike.
  auto evaluate = [&](int64_t step) {
    int64_t tested = 0;
    const int64_t correct = run.evaluate_shard(&tested);
    std::vector<double> m{loss_sum, static_cast<double>(losses), static_cast<double>(correct),
                          static_cast<double>(tested)};
    sum_over_ranks("fashion_mnist.tta.metrics", m);
    const uint64_t bytes = arcreduce::stats().bytes_sent;
    AccuracyPoint p;
    p.step = step;
    p.seconds = training_seconds;
    p.test_accuracy = m[3] > 0 ? m[2] / m[3] : 0;
    p.train_loss = m[1] > 0 ? m[0] / m[1] : 0;
    p.bytes_per_step = step > step_mark ? static_cast<double>(bytes - bytes_mark) /
                                              static_cast<double>(step - step_mark)
                                        : 0;
    bytes_mark = bytes;
    step_mark = step;
    loss_sum = 0;
    losses = 0;
    result.points.push_back(p);
    on_point(p);
    return tta.target > 0 && p.test_accuracy >= tta.target;
  };
  evaluate(0);
  for (int64_t step = 0; step < tta.max_steps && !result.reached;) {
    if (step % per_epoch == 0) run.sharder.shuffle(run.shuffle);
    const Clock::time_point start = Clock::now();
    loss_sum += run.train_step(step % per_epoch);
    training_seconds += seconds_since(start);
    ++losses;
    ++step;
    if (step % tta.eval_every == 0 || step == tta.max_steps) result.reached = evaluate(step);
  }
  result.ranks_agree = run.ranks_agree(model_hash(run.model));
  return result;
}

StepBenchResult benchmark_steps(const Dataset& data, const TrainOptions& options,
                                const StepBenchOptions& bench) {
  Run run(data, options);
  if (run.sharder.steps_per_epoch() == 0) {
    throw std::runtime_error("a global batch is larger than the training examples");
  }
  run.sharder.shuffle(run.shuffle);
  StepBenchResult result;
  result.warmup = bench.warmup;
  result.parameters = run.model.parameter_count();
  int64_t step = 0;
  double warmup_seconds = 0;
  for (int i = 0; i < bench.warmup; ++i) {
    warmup_seconds += run.timed_step(step++, bench.communicate).total;
  }

  // Every rank must time the same number of steps: decide from the mean over ranks.
  int steps = bench.steps;
  if (bench.budget > 0 && bench.warmup > 0) {
    std::vector<double> mean{warmup_seconds / bench.warmup};
    sum_over_ranks("fashion_mnist.bench.warmup", mean);
    const double fit = bench.budget / std::max(mean[0] / run.size, 1e-9);
    if (fit < bench.steps) steps = std::max(std::min(bench.steps, 10), static_cast<int>(fit));
  }

  const bool count_link = !bench.link_interface.empty() && run.rank == 0;
  const uint64_t link_before = count_link ? interface_bytes(bench.link_interface) : 0;
  const Counters before = read_counters();
  std::vector<Run::StepTime> own(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) own[i] = run.timed_step(step++, bench.communicate);
  const Counters after = read_counters();
  if (count_link) result.link_bytes = interface_bytes(bench.link_interface) - link_before;

  // All ranks' durations and waits, then per step the longest rank's duration and that rank's
  // wait.
  const auto per_rank = static_cast<size_t>(2 * steps);
  std::vector<double> mine(per_rank);
  for (int i = 0; i < steps; ++i) {
    mine[2 * i] = own[i].total;
    mine[2 * i + 1] = own[i].wait;
  }
  const std::vector<double> all =
      from_every_rank("fashion_mnist.bench.times", mine, run.rank, run.size);
  result.step_seconds.assign(static_cast<size_t>(steps), 0.0);
  result.wait_seconds.assign(static_cast<size_t>(steps), 0.0);
  for (int r = 0; r < run.size; ++r) {
    for (int i = 0; i < steps; ++i) {
      const double total = all[per_rank * r + 2 * i];
      if (r == 0 || total > result.step_seconds[i]) {
        result.step_seconds[i] = total;
        result.wait_seconds[i] = all[per_rank * r + 2 * i + 1];
      }
    }
  }
  if (run.rank == 0) {  // the negotiation's root; a floor's are not printed
    result.bytes_sent = after.bytes_sent - before.bytes_sent;
    result.collectives = after.collectives - before.collectives;
    result.negotiation_collectives = after.negotiation_collectives - before.negotiation_collectives;
    result.coordinator_cpu_seconds = after.coordinator_cpu_seconds - before.coordinator_cpu_seconds;
    result.held_steps = after.held_steps - before.held_steps;
    result.allreduce_calls = grown(after.allreduce_calls, before.allreduce_calls);
    result.allreduce_bytes = grown(after.allreduce_bytes, before.allreduce_bytes);
    result.collective_calls = grown(after.collective_calls, before.collective_calls);
    result.collective_bytes = grown(after.collective_bytes, before.collective_bytes);
    result.link_latency_us = after.link_latency_us;
    result.link_mbit_per_s = after.link_mbit_per_s;
    result.hosts = after.hosts;
    result.hierarchical = after.hierarchical;
  }
  return result;
}

}  // namespace fmnist
