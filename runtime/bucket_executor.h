// BucketExecutor: reduces (or broadcasts) one fused bucket in place across ranks on the
// coordinator thread. Broadcast buckets send each tensor from its own memory, one broadcast per
// tensor (chunked by the communicator), without staging copies or compressor state.
// Compressed buckets go through the compressor pipeline in fp32 (tensors still in their
// ARCREDUCE_WARMUP_STEPS take the dense path); "none" buckets (the native path of the
// compressors' registry) take the dense path below.
// Dense path, chunk by chunk (plan_chunks): large tensors are reduced in their own memory, small
// ones staged through the fusion buffer; each chunk is one sum All-Reduce, scaled for kAverage.
// fp16/bf16: the collective adds in fp32 and rounds once per addition; kAverage pre-scales by
// 1/N so that the partial sums cannot overflow where the mean does not.
// CUDA buckets go to the DeviceExecutor (docs/cuda.md), which may leave work queued on its
// stream: run() then returns the completion the coordinator waits for before the callbacks.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "arcreduce/stats.h"
#include "compressors/compressor.h"
#include "compressors/compressor_options.h"
#include "compressors/tensor_state.h"
#include "runtime/context.h"
#include "runtime/device_executor.h"
#include "tensor_queue/fusion_buffer.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class BucketExecutor {
 public:
  BucketExecutor(Context& ctx, StateStore& state);

  // All entries share dtype, op, device kind and compression (`signature` is the first one's).
  // Throws Error on communication failure: ranks may then disagree, so the caller ends the job.
  // CUDA buckets may leave device work queued: the returned completion (null when none) must be
  // ready before the ops complete.
  std::unique_ptr<DeviceCompletion> run(const std::vector<TensorEntry*>& entries,
                                        const TensorSignature& signature, Stats& stats);
  // Phases of the last run() (recorded only while enabled: the timeline is on).
  PhaseLog& phases() { return phases_; }
  // ARCREDUCE_AUTO_COMPRESS's mode for the tensors it manages (CompressionSpec::automatic): true
  // reduces them densely, as in a warm-up step (efm keeps its momentum), until set false again.
  // Set by the coordinator between buckets, the same on every rank.
  void set_automatic_dense(bool dense) { automatic_dense_ = dense; }

 private:
  // Host tensors (and host copies of CUDA tensors on their compressed path).
  void run_host(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
                Stats& stats, CompressorStats& cstats);
  // Native-dtype dense reduction (compressor "none", warm-up steps).
  void run_dense(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
                 Stats& stats, CompressorStats& cstats);
  // allgather, alltoall, reducescatter: one entry per bucket (never fused).
  void run_shaped(TensorEntry& entry, const TensorSignature& signature, Stats& stats);
  void run_broadcast(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
                     Stats& stats);
  // fp32 working copies through the compressor pipeline (with error feedback).
  void run_compressed(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
                      Stats& stats, CompressorStats& cstats);
  Compressor& pipeline(const CompressionSpec& spec);

  Context& ctx_;
  StateStore& state_;
  const CompressorOptions options_;  // of ctx_.config, for the compressors
  CompressorOptions dense_options_;  // the same, efm told to send every tensor densely
  bool automatic_dense_ = false;
  size_t chunk_bytes_;
  FusionBuffer buffer_;
  std::map<std::string, std::unique_ptr<Compressor>> pipelines_;  // by "compressor/ef"
  std::vector<std::vector<float>> inputs_, outputs_;              // reused working copies
  PhaseLog phases_;
  std::unique_ptr<DeviceExecutor> device_;  // null without CUDA
};

}  // namespace arcreduce
