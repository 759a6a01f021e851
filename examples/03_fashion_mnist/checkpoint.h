// Checkpoints of a training run: per rank, `<prefix>.rank<r>.ckpt` (model, optimizer momentum,
// progress, shuffling generator, the settings that shape the trajectory) and
// `<prefix>.rank<r>.arcreduce` (arcreduce::save_state: error-feedback buffers, step counters).
// Every rank writes and reads its own files, so no shared file system is needed. Format:
// docs/training-example.md, "Checkpoints".
#pragma once

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlp.h"
#include "sgd.h"

namespace fmnist {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What identifies a run's trajectory; a checkpoint resumes only a run with equal settings.
struct RunSettings {
  int rank = 0;
  int size = 0;
  uint64_t seed = 0;
  int64_t batch_size = 0;
  int64_t train_examples = 0;
  std::vector<int64_t> widths;
  std::string compressor;
  double ratio = 0;
  std::string error_feedback;
  double lr = 0;
  double momentum = 0;
};

struct TrainingProgress {
  int64_t epochs_done = 0;
  int64_t global_step = 0;
};

std::string checkpoint_path(const std::string& prefix, int rank);
std::string runtime_state_path(const std::string& prefix, int rank);

// Writes both files of this rank (each to a temporary name, then renamed). Call between steps,
// with no op in flight, on every rank. Throws CheckpointError or arcreduce::Error.
void save_checkpoint(const std::string& prefix, const RunSettings& settings,
                     const TrainingProgress& progress, const std::mt19937_64& shuffle_engine,
                     const Mlp& model, const SgdMomentum& sgd);

// Restores what save_checkpoint wrote into `progress`, `shuffle_engine`, `model` and `sgd`,
// after checking the file's checksum and that it was written with `settings` (names the first
// difference otherwise). Throws CheckpointError or arcreduce::Error.
void load_checkpoint(const std::string& prefix, const RunSettings& settings,
                     TrainingProgress& progress, std::mt19937_64& shuffle_engine, Mlp& model,
                     SgdMomentum& sgd);

// FNV-1a (64 bit) of every parameter's bytes: equal hashes mean bit-identical models.
uint64_t model_hash(const Mlp& model);

}  // namespace fmnist
