#include "runtime/compression_choice.h"

#include <algorithm>

namespace arcreduce {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

constexpr uint64_t kCompressedFrom = CompressionChoice::kDenseTrialSteps;
constexpr uint64_t kTrialEnd = kCompressedFrom + CompressionChoice::kCompressedTrialSteps;
// TensorState::doubles entries of the clock tensor.
constexpr char kRecord[] = "auto_compress";  // steps, decided, compress, agreed medians
constexpr char kCompressedMs[] = "auto_compress.compressed_ms";
constexpr char kDenseMs[] = "auto_compress.dense_ms";

}  // namespace

CompressionChoice::Mode CompressionChoice::scheduled(uint64_t step) const {
  if (step < kCompressedFrom) return Mode::kDense;
  if (step < kTrialEnd) return Mode::kCompressed;
  return decided_ && compress_ ? Mode::kCompressed : Mode::kDense;
}

bool CompressionChoice::timed(uint64_t step, Mode* mode) const {
  if (step >= static_cast<uint64_t>(kUntimedDenseSteps) && step < kCompressedFrom) {
    *mode = Mode::kDense;
    return true;
  }
  if (step > kCompressedFrom && step < kTrialEnd) {
    *mode = Mode::kCompressed;
    return true;
  }
  return false;
}

CompressionChoice::Mode CompressionChoice::mode() const {
  return enabled_ ? scheduled(steps_) : Mode::kCompressed;
}

CompressionChoice::Mode CompressionChoice::mode_at(uint64_t reductions) const {
  if (!enabled_) return Mode::kCompressed;
  if (reductions < kTrialEnd) return scheduled(reductions);  // the trial's own, decided or not
  return decided_ && compress_ ? Mode::kCompressed : Mode::kDense;
}

const char* CompressionChoice::state() const {
  if (!enabled_ || !started()) return "off";
  if (!decided_) return "trial";
  return compress_ ? "compressed" : "dense";
}

CompressionChoice::Holding CompressionChoice::holding() const {
  if (!enabled_ || !started()) return Holding::kOwn;
  if (mode() == Mode::kDense) return Holding::kNever;
  return decided_ ? Holding::kOwn : Holding::kAlways;
}

void CompressionChoice::executed(const std::vector<const std::string*>& names,
                                 Clock::time_point now) {
  if (!enabled_ || names.empty()) return;
  if (clock_.empty()) clock_ = *names.front();
  if (std::none_of(names.begin(), names.end(),
                   [&](const std::string* n) { return *n == clock_; })) {
    return;
  }
  Mode mode = Mode::kCompressed;
  if (steps_ > 0 && last_ != Clock::time_point{} && timed(steps_, &mode)) {
    ms_[static_cast<int>(mode)].push_back(
        std::chrono::duration<double, std::milli>(now - last_).count());
  }
  last_ = now;
  ++steps_;
  if (!trial_.done && steps_ >= kTrialEnd) {
    trial_.done = true;
    trial_.compressed_median_ms = median(ms_[static_cast<int>(Mode::kCompressed)]);
    trial_.dense_median_ms = median(ms_[static_cast<int>(Mode::kDense)]);
  }
}

void CompressionChoice::decide(Communicator& comm, int rank, int size, const Logger& log) {
  decided_ = true;
  double medians[2] = {trial_.compressed_median_ms, trial_.dense_median_ms};
  comm.allreduce(medians, 2, ScalarType::kFloat64, CollectiveOp::kSum);
  agreed_compressed_ms_ = medians[0] / size;
  agreed_dense_ms_ = medians[1] / size;
  compress_ = compression_pays(agreed_compressed_ms_, agreed_dense_ms_);
  if (rank != 0) return;
  // At warning level, which the default log level shows: what the runtime chose for the job.
  log->warn(
      "ARCREDUCE_AUTO_COMPRESS: median step {:.1f} ms compressed, {:.1f} ms dense ({} and {} "
      "steps, mean over ranks): the dense step is {:.2f}x the compressed one, {} {:.1f}x that "
      "compression's extra steps need: {}",
      agreed_compressed_ms_, agreed_dense_ms_, kCompressedTrialSteps - 1,
      kDenseTrialSteps - kUntimedDenseSteps,
      agreed_compressed_ms_ > 0 ? agreed_dense_ms_ / agreed_compressed_ms_ : 0.0,
      compress_ ? "at least the" : "below the", kStepsFactor,
      compress_ ? "compressing from now on" : "reducing densely from now on");
}

void CompressionChoice::save_to(TensorState& clock_state) const {
  clock_state.doubles[kRecord] = {static_cast<double>(steps_), decided_ ? 1.0 : 0.0,
                                  compress_ ? 1.0 : 0.0, agreed_compressed_ms_, agreed_dense_ms_};
  clock_state.doubles[kCompressedMs] = ms_[static_cast<int>(Mode::kCompressed)];
  clock_state.doubles[kDenseMs] = ms_[static_cast<int>(Mode::kDense)];
}

bool CompressionChoice::restore_from(
    const std::vector<std::pair<const std::string*, const TensorState*>>& states) {
  if (!enabled_ || started()) return false;
  for (const auto& [name, state] : states) {
    const auto it = state->doubles.find(kRecord);
    if (it == state->doubles.end() || it->second.size() != 5) continue;
    const std::vector<double>& r = it->second;
    clock_ = *name;
    steps_ = static_cast<uint64_t>(r[0]);
    decided_ = r[1] != 0;
    compress_ = r[2] != 0;
    agreed_compressed_ms_ = r[3];
    agreed_dense_ms_ = r[4];
    const auto compressed = state->doubles.find(kCompressedMs);
    const auto dense = state->doubles.find(kDenseMs);
    if (compressed != state->doubles.end())
      ms_[static_cast<int>(Mode::kCompressed)] = compressed->second;
    if (dense != state->doubles.end()) ms_[static_cast<int>(Mode::kDense)] = dense->second;
    if (steps_ >= kTrialEnd) {
      trial_.done = true;
      trial_.compressed_median_ms = median(ms_[static_cast<int>(Mode::kCompressed)]);
      trial_.dense_median_ms = median(ms_[static_cast<int>(Mode::kDense)]);
    }
    last_ = Clock::time_point{};  // the first step after the resume is not timed
    return true;
  }
  return false;
}

}  // namespace arcreduce
