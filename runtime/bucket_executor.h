// BucketExecutor: reduces one fused bucket in place across ranks on the coordinator thread.
// Dense path, chunk by chunk (plan_chunks): large tensors are reduced in their own memory, small
// ones staged through the fusion buffer; each chunk is one sum All-Reduce, scaled for kAverage.
// fp16/bf16: the collective adds in fp32 and rounds once per addition; kAverage pre-scales by
// 1/N so that the partial sums cannot overflow where the mean does not.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "arcreduce/stats.h"
#include "runtime/context.h"
#include "tensor_queue/fusion_buffer.h"
#include "tensor_queue/tensor_queue.h"

namespace arcreduce {

class BucketExecutor {
 public:
  explicit BucketExecutor(Context& ctx);

  // All entries share dtype, op, device kind and compression (`signature` is the first one's).
  // Throws Error on communication failure: ranks may then disagree, so the caller ends the job.
  void run(const std::vector<TensorEntry*>& entries, const TensorSignature& signature,
           Stats& stats);

 private:
  Context& ctx_;
  size_t chunk_bytes_;
  FusionBuffer buffer_;
  std::set<std::string> warned_compressors_;
};

}  // namespace arcreduce
