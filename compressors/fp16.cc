#include "compressors/fp16.h"

#include <vector>

#include "compressors/kernels/kernels.h"

namespace arcreduce {

void Fp16::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  size_t total = 0;
  for (const CompressTensor& t : bucket) total += t.elements;
  if (total == 0) return;
  const float inv_n = 1.0f / static_cast<float>(ctx.comm.size());
  begin_phase(ctx, "pack", "compress");
  std::vector<float> scaled;
  std::vector<uint16_t> wire(total);
  size_t offset = 0;
  for (const CompressTensor& t : bucket) {
    scaled.assign(t.input, t.input + t.elements);
    kernels::scale(scaled.data(), t.elements, inv_n);
    kernels::from_float(scaled.data(), DType::kFloat16, wire.data() + offset, t.elements);
    if (t.contribution) {
      std::vector<uint16_t> own(t.elements);
      kernels::from_float(t.input, DType::kFloat16, own.data(), t.elements);
      kernels::to_float(own.data(), DType::kFloat16, t.contribution, t.elements);
    }
    offset += t.elements;
  }
  ctx.stats.value_bytes += total * sizeof(uint16_t);
  begin_phase(ctx, "values collective", "communicate");
  ctx.comm.allreduce(wire.data(), total, ScalarType::kFloat16, CollectiveOp::kSum);
  begin_phase(ctx, "decompress", "decompress");
  offset = 0;
  for (CompressTensor& t : bucket) {
    kernels::to_float(wire.data() + offset, DType::kFloat16, t.output, t.elements);
    offset += t.elements;
  }
}

// The factory its row in compressors.inc names.
std::unique_ptr<Compressor> make_fp16() {
  return std::make_unique<Fp16>();
}

}  // namespace arcreduce
