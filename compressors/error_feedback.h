// Error feedback as a decorator around any compressor (specs/arc-top-k.md, "Error feedback").
// State per tensor name, fp32, in the StateStore. With g the gradient and C the wrapped
// compressor (mean over ranks of C_i):
//   ef14:  x = g + e; output mean C(x); e = x - C_i(x).
//   ef21:  first step with a warm start: h = g, hbar = mean g (dense), output hbar; later
//          c = C(g - h); h += C_i(g - h); hbar += mean c; output hbar. A cold start
//          (ARCREDUCE_EF_INIT=zero) begins from h = hbar = 0.
//   ef21m: v = (1 - eta) v + eta g (warm start: v = g first; cold: v starts at 0), then ef21 on v.
//   efm:   error feedback on the optimizer's momentum (Deep Gradient Compression's momentum
//          correction): u = (1 - eta) u + g (u starts at 0); x = u + e; output mean C(x);
//          e = x - C_i(x). The user's optimizer runs without momentum: at ratio 1 this is
//          heavy-ball SGD with momentum 1 - eta exactly. With ARCREDUCE_EF_MASKING=1, u is also
//          cleared where C_i(x) is non-zero (momentum-factor masking).
#pragma once

#include <memory>

#include "compressors/compressor.h"
#include "compressors/dense_mean.h"
#include "compressors/tensor_state.h"

namespace arcreduce {

class ErrorFeedback : public Compressor {
 public:
  enum class Kind { kEf14, kEf21, kEf21m, kEfm };
  ErrorFeedback(std::unique_ptr<Compressor> inner, Kind kind, StateStore& store)
      : inner_(std::move(inner)), kind_(kind), store_(store) {}

  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override;

 private:
  void reduce_ef14(std::vector<CompressTensor>& bucket, CompressContext& ctx);
  void reduce_ef21(std::vector<CompressTensor>& bucket, CompressContext& ctx);

  std::unique_ptr<Compressor> inner_;
  Kind kind_;
  StateStore& store_;
  // Scratch reused across calls, never zeroed: steady state allocates and clears nothing.
  PackedBuffer work_, own_, mean_;
};

// "ef14", "ef21", "ef21m", "efm" wrap `inner`; "none" returns it unwrapped.
std::unique_ptr<Compressor> with_error_feedback(std::unique_ptr<Compressor> inner,
                                                const std::string& kind, StateStore& store);

}  // namespace arcreduce
