// ARC-Top-K with error feedback as one sequence of kernel calls on a backend (the device
// pipeline, docs/cuda.md): the ErrorFeedback decorator (error_feedback.h) around the device plan
// (arctopk_device_plan.h), written against the same backend interface so that the CPU kernels
// prove it equal to the host pipeline and the CUDA kernels run it on the runtime stream.
//
// The caller owns the per-tensor state (backend memory, `elements` floats per buffer the kind
// needs, zeroed when first allocated) and its `started` flag, which it sets after the run. The
// results equal the host pipeline's bit for bit except for one documented difference: h and hbar
// take the compressor's mean and contribution added on every element, not only on the selected
// rows, so a -0.0 there becomes +0.0 (x + 0.0f == x for every other x).
#pragma once

#include <string>
#include <vector>

#include "compressors/arctopk_device_plan.h"

namespace arcreduce {

enum class FeedbackKind { kNone, kEf14, kEf21, kEf21m };

// "none", "ef14", "ef21", "ef21m"; throws Error naming the value otherwise.
inline FeedbackKind feedback_kind(const std::string& name) {
  if (name == "none") return FeedbackKind::kNone;
  if (name == "ef14") return FeedbackKind::kEf14;
  if (name == "ef21") return FeedbackKind::kEf21;
  if (name == "ef21m") return FeedbackKind::kEf21m;
  if (name == "efm") {
    throw Error(
        "error feedback 'efm' is not available for CUDA tensors yet (none, ef14, ef21, "
        "ef21m are); set ARCREDUCE_ERROR_FEEDBACK or the tensor's option to one of those",
        StatusCode::kInvalidArgument);
  }
  throw Error("unknown error feedback '" + name + "' (none, ef14, ef21, ef21m)",
              StatusCode::kInvalidArgument);
}

// Which state buffers a kind keeps (TensorState's e, h, hbar, v).
struct FeedbackBuffers {
  bool e = false, h = false, hbar = false, v = false;
};
inline FeedbackBuffers feedback_buffers(FeedbackKind kind) {
  FeedbackBuffers b;
  b.e = kind == FeedbackKind::kEf14;
  b.h = b.hbar = kind == FeedbackKind::kEf21 || kind == FeedbackKind::kEf21m;
  b.v = kind == FeedbackKind::kEf21m;
  return b;
}

struct ArcFeedbackTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t elements = 0;
  uint64_t step = 0;
  const float* input = nullptr;  // g
  float* output = nullptr;       // may alias input: every kind reads g before writing it
  // State (backend memory), the buffers feedback_buffers() names; the others may be null.
  float* e = nullptr;
  float* h = nullptr;
  float* hbar = nullptr;
  float* v = nullptr;
  bool started = false;  // TensorState::ef_started
};

// Host-side decisions for one bucket: which tensors are compressed (the others start EF21 warm:
// one dense mean), the plan of the compressed ones and the workspace they need.
struct ArcFeedbackPlan {
  FeedbackKind kind = FeedbackKind::kNone;
  float eta = 1.0f;
  std::vector<size_t> compressed;  // indices into the bucket
  std::vector<size_t> warm;        // EF21/EF21M first steps with ARCREDUCE_EF_INIT=warm
  ArcTopKPlan plan;                // of the compressed tensors, in that order
  std::vector<size_t> work_at;     // per compressed tensor: offset of its x (or difference)
  size_t work_floats = 0;          // x/difference, own contribution, mean, per compressed tensor
  size_t warm_floats = 0;          // the warm start's collective buffer
};

inline ArcFeedbackPlan plan_arc_feedback(const std::vector<ArcFeedbackTensor>& bucket,
                                         const Config& config, const CompressionSpec& spec,
                                         int world_size) {
  ArcFeedbackPlan p;
  p.kind = feedback_kind(spec.error_feedback);
  const bool ef21 = p.kind == FeedbackKind::kEf21 || p.kind == FeedbackKind::kEf21m;
  p.eta = p.kind == FeedbackKind::kEf21m ? static_cast<float>(config.ef_momentum) : 1.0f;
  std::vector<ArcTopKPlanTensor> inner;
  size_t per_tensor_total = 0;
  for (size_t i = 0; i < bucket.size(); ++i) {
    const ArcFeedbackTensor& t = bucket[i];
    if (ef21 && !t.started && config.ef_init == "warm") {
      p.warm.push_back(i);
      p.warm_floats += t.elements;
      continue;
    }
    p.compressed.push_back(i);
    p.work_at.push_back(per_tensor_total);
    per_tensor_total += t.elements;
    ArcTopKPlanTensor it;
    it.name = t.name;
    it.shape = t.shape;
    it.elements = t.elements;
    it.step = t.step;
    inner.push_back(it);
  }
  // none: nothing; ef14: x and own; ef21: difference, own and mean.
  const size_t copies = p.kind == FeedbackKind::kNone ? 0 : ef21 ? 3 : 2;
  p.work_floats = copies * per_tensor_total;
  p.plan = plan_arctopk(inner, config, spec, world_size);
  return p;
}

// Runs the bucket: K is a plan backend (run_arctopk_plan) that also provides axpby, subtract and
// momentum_diff of kernels.h. `work` holds p.work_floats, `warm_buffer` p.warm_floats; `buf` is
// sized by p.plan. Collectives, in this order on every rank: the warm start's mean (if any),
// then the plan's two.
template <class K, class Allreduce>
void run_arc_feedback(K& k, const ArcFeedbackPlan& p, const std::vector<ArcFeedbackTensor>& bucket,
                      float* work, float* warm_buffer, const ArcTopKPlanBuffers& buf,
                      Allreduce&& allreduce) {
  const bool ef21 = p.kind == FeedbackKind::kEf21 || p.kind == FeedbackKind::kEf21m;
  const bool momentum = p.kind == FeedbackKind::kEf21m;
  const size_t total = p.work_floats / (p.kind == FeedbackKind::kNone ? 1 : ef21 ? 3 : 2);
  float* const x_base = work;
  float* const own_base = work + total;
  float* const mean_base = work + 2 * total;

  // EF21 first steps: state from zero (cold) or v = g, h = g, hbar = mean h (warm).
  for (const ArcFeedbackTensor& t : bucket) {
    if (!ef21 || t.started || !t.elements) continue;
    k.fill(t.h, t.elements, 0.0f);
    k.fill(t.hbar, t.elements, 0.0f);
    if (momentum) k.fill(t.v, t.elements, 0.0f);
  }
  if (!p.warm.empty()) {
    size_t at = 0;
    for (size_t i : p.warm) {
      const ArcFeedbackTensor& t = bucket[i];
      if (momentum) k.copy(t.v, t.input, t.elements);
      k.copy(t.h, t.input, t.elements);
      k.copy(warm_buffer + at, t.input, t.elements);
      at += t.elements;
    }
    if (p.warm_floats) {
      allreduce(warm_buffer, p.warm_floats);
      k.scale(warm_buffer, p.warm_floats, p.plan.inv_n);  // as dense_mean
    }
  }

  std::vector<ArcTopKPlanTensor> inner(p.compressed.size());
  for (size_t j = 0; j < p.compressed.size(); ++j) {
    const ArcFeedbackTensor& t = bucket[p.compressed[j]];
    ArcTopKPlanTensor& c = inner[j];
    c.name = t.name;
    c.shape = t.shape;
    c.elements = t.elements;
    c.step = t.step;
    const size_t n = t.elements;
    float* x = x_base + p.work_at[j];
    switch (p.kind) {
      case FeedbackKind::kNone:
        c.input = t.input;
        c.output = t.output;
        break;
      case FeedbackKind::kEf14:  // x = g + e
        k.copy(x, t.input, n);
        k.axpby(1.0f, t.e, 1.0f, x, n);
        c.input = x;
        c.output = t.output;
        c.contribution = own_base + p.work_at[j];
        break;
      case FeedbackKind::kEf21:   // x = g - h
      case FeedbackKind::kEf21m:  // v = (1 - eta) v + eta g, x = v - h
        if (momentum) {
          k.momentum_diff(t.input, t.v, t.h, p.eta, x, n);
        } else {
          k.subtract(t.input, t.h, x, n);
        }
        c.input = x;
        c.output = mean_base + p.work_at[j];
        c.contribution = own_base + p.work_at[j];
        break;
    }
  }
  run_arctopk_plan(k, p.plan, inner, buf, allreduce);

  for (size_t j = 0; j < p.compressed.size(); ++j) {
    const ArcFeedbackTensor& t = bucket[p.compressed[j]];
    const size_t n = t.elements;
    if (p.kind == FeedbackKind::kEf14) {
      k.subtract(inner[j].input, inner[j].contribution, t.e, n);  // e = x - C_i(x)
    } else if (ef21) {
      k.axpby(1.0f, inner[j].contribution, 1.0f, t.h, n);  // h += C_i
      k.axpby(1.0f, inner[j].output, 1.0f, t.hbar, n);     // hbar += mean c
    }
  }
  if (!ef21) return;
  size_t at = 0;
  for (size_t i : p.warm) {
    const ArcFeedbackTensor& t = bucket[i];
    k.copy(t.hbar, warm_buffer + at, t.elements);
    at += t.elements;
  }
  for (const ArcFeedbackTensor& t : bucket) k.copy(t.output, t.hbar, t.elements);
}

}  // namespace arcreduce
