// fp16 (Horovod's compression, specs/baselines.md): each rank pre-scales by 1/P and casts to
// fp16 for the wire; the All-Reduce adds in fp32 and rounds once per addition; the result is
// cast back. Stateless: this rank's contribution is its fp16-rounded input.
#pragma once

#include "compressors/compressor.h"

namespace arcreduce {

class Fp16 : public Compressor {
 public:
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;
};

}  // namespace arcreduce
