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
#include "compressors/compressor_options.h"
#include "compressors/feedback_kinds.h"

namespace arcreduce {

// The kind of error feedback `name` (feedback_kinds.h); throws Error naming the value for a name
// that is none.
inline FeedbackKind feedback_kind(const std::string& name) {
  if (const FeedbackRow* row = find_feedback(name)) return row->kind;
  std::string names;
  for (const FeedbackRow& row : kFeedbackRows)
    names += (names.empty() ? "" : ", ") + std::string(row.name);
  throw Error("unknown error feedback '" + name + "' (" + names + ")",
              StatusCode::kInvalidArgument);
}

// Which state buffers a kind keeps (TensorState's e, h, hbar, v; efm's velocity lives in v).
struct FeedbackBuffers {
  bool e = false, h = false, hbar = false, v = false;
};
inline FeedbackBuffers feedback_buffers(FeedbackKind kind) {
  FeedbackBuffers b;
  b.e = kind == FeedbackKind::kEf14 || kind == FeedbackKind::kEfm;
  b.h = b.hbar = kind == FeedbackKind::kEf21 || kind == FeedbackKind::kEf21m;
  b.v = kind == FeedbackKind::kEf21m || kind == FeedbackKind::kEfm;
  return b;
}

// Whether a state that error feedback started holds what `kind` continues from (`held`: the
// buffers it has), as ErrorFeedback decides on the host: EF21 needs h and hbar (EF21M also v),
// efm a state without EF21's estimates (ef21m's v is no velocity). Where it does not, the kind
// starts over (ArcFeedbackTensor::started false).
inline bool continues_state(FeedbackKind kind, const FeedbackBuffers& held) {
  switch (kind) {
    case FeedbackKind::kEf21:
      return held.h && held.hbar;
    case FeedbackKind::kEf21m:
      return held.h && held.hbar && held.v;
    case FeedbackKind::kEfm:
      return !held.h;
    default:
      return true;
  }
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
  // TensorState::ef_started and continues_state(): false starts the kind over (EF21's first
  // step, efm's velocity from zero).
  bool started = false;
};

// Host-side decisions for one bucket: which tensors are compressed (the others start EF21 warm or
// are in efm's warm-up: one dense mean), the plan of the compressed ones and the workspace they
// need.
struct ArcFeedbackPlan {
  FeedbackKind kind = FeedbackKind::kNone;
  float eta = 1.0f;                // ef21m
  float beta = 0.0f;               // efm: u = beta u + g, beta = 1 - ARCREDUCE_EF_ETA
  std::vector<size_t> compressed;  // indices into the bucket
  // EF21/EF21M first steps with ARCREDUCE_EF_INIT=warm; efm's ARCREDUCE_WARMUP_STEPS, which send
  // their whole x densely so that the warm-up keeps the momentum (as ErrorFeedback on the host).
  std::vector<size_t> warm;
  // efm, per compressed tensor: clear the velocity where the rank's contribution was sent
  // (ARCREDUCE_EF_MASKING, with ErrorFeedback's exemption of tensors whose selected rows are at
  // least the share eta of the tensor).
  std::vector<bool> mask;
  ArcTopKPlan plan;             // of the compressed tensors, in that order
  std::vector<size_t> work_at;  // per compressed tensor: offset of its x (or difference)
  // ef14: x and own contribution; efm: own contribution (x is formed in e); ef21: difference, own
  // contribution and mean; per compressed tensor.
  size_t work_floats = 0;
  size_t warm_floats = 0;  // the warm start's (warm-up's) collective buffer
};

// Scratch copies per compressed tensor that a kind keeps in `work` (ArcFeedbackPlan).
inline size_t feedback_work_copies(FeedbackKind kind) {
  switch (kind) {
    case FeedbackKind::kNone:
      return 0;
    case FeedbackKind::kEfm:
      return 1;
    case FeedbackKind::kEf14:
      return 2;
    default:
      return 3;
  }
}

inline ArcFeedbackPlan plan_arc_feedback(const std::vector<ArcFeedbackTensor>& bucket,
                                         const CompressorOptions& options,
                                         const CompressionSpec& spec, int world_size) {
  const FeedbackOptions& feedback = options.feedback;
  ArcFeedbackPlan p;
  p.kind = feedback_kind(spec.error_feedback);
  const bool ef21 = p.kind == FeedbackKind::kEf21 || p.kind == FeedbackKind::kEf21m;
  const bool efm = p.kind == FeedbackKind::kEfm;
  p.eta = p.kind == FeedbackKind::kEf21m ? static_cast<float>(feedback.eta) : 1.0f;
  p.beta = 1.0f - static_cast<float>(feedback.eta);
  std::vector<ArcTopKPlanTensor> inner;
  size_t per_tensor_total = 0;
  for (size_t i = 0; i < bucket.size(); ++i) {
    const ArcFeedbackTensor& t = bucket[i];
    // efm's step counts every reduction of its tensor: the executor leaves its warm-up to it.
    const bool efm_warmup = efm && static_cast<int64_t>(t.step) < feedback.warmup_steps;
    if ((ef21 && !t.started && feedback.init == FeedbackInit::kWarm) || efm_warmup) {
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
  p.work_floats = feedback_work_copies(p.kind) * per_tensor_total;
  p.plan = plan_arctopk(inner, options, spec, world_size);
  if (efm) {
    for (size_t j = 0; j < inner.size(); ++j) {
      const ArcTopKPlan::Item& it = p.plan.items[j];
      const bool rows = it.path != ArcTopKPlan::Path::kDense;
      const bool keeps_velocity = rows && static_cast<double>(it.k) * static_cast<double>(it.m) >=
                                              feedback.eta * static_cast<double>(inner[j].elements);
      p.mask.push_back(feedback.masking && !keeps_velocity);
    }
  }
  return p;
}

// Runs the bucket: K is a plan backend (run_arctopk_plan) that also provides axpby, subtract,
// momentum_diff and clear_where_sent of kernels.h. `work` holds p.work_floats, `warm_buffer`
// p.warm_floats; `buf` is sized by p.plan. Collectives, in this order on every rank: the warm
// start's (or efm warm-up's) mean, if any, then the plan's two.
template <class K, class Allreduce>
void run_arc_feedback(K& k, const ArcFeedbackPlan& p, const std::vector<ArcFeedbackTensor>& bucket,
                      float* work, float* warm_buffer, const ArcTopKPlanBuffers& buf,
                      Allreduce&& allreduce) {
  const bool ef21 = p.kind == FeedbackKind::kEf21 || p.kind == FeedbackKind::kEf21m;
  const bool momentum = p.kind == FeedbackKind::kEf21m;
  const bool efm = p.kind == FeedbackKind::kEfm;
  const size_t copies = feedback_work_copies(p.kind);
  const size_t total = copies ? p.work_floats / copies : 0;
  // `work` per compressed tensor's offset: ef14 x | own; efm own (x lives in e); ef21 x | own |
  // mean. A region a kind does not have gets no pointer.
  const bool has_x = p.kind == FeedbackKind::kEf14 || ef21;
  float* const own_base = efm ? work : work + total;
  float* const mean_base = ef21 ? work + 2 * total : nullptr;

  if (efm) {
    // u = beta u + g, then e += u: e holds x (ErrorFeedback's accumulate_feedback, whose IEEE
    // operations are these two axpby). A velocity that did not start here starts from zero.
    for (const ArcFeedbackTensor& t : bucket) {
      if (!t.elements) continue;
      if (!t.started) k.fill(t.v, t.elements, 0.0f);
      k.axpby(1.0f, t.input, p.beta, t.v, t.elements);
      k.axpby(1.0f, t.v, 1.0f, t.e, t.elements);
    }
    if (!p.warm.empty()) {  // the warm-up: the mean of x, and nothing left in e
      size_t at = 0;
      for (size_t i : p.warm) {
        const ArcFeedbackTensor& t = bucket[i];
        k.copy(warm_buffer + at, t.e, t.elements);
        at += t.elements;
      }
      if (p.warm_floats) {
        allreduce(warm_buffer, p.warm_floats);
        k.scale(warm_buffer, p.warm_floats, p.plan.inv_n);  // as dense_mean
      }
      at = 0;
      for (size_t i : p.warm) {
        const ArcFeedbackTensor& t = bucket[i];
        k.copy(t.output, warm_buffer + at, t.elements);
        k.fill(t.e, t.elements, 0.0f);
        at += t.elements;
      }
    }
  }

  // EF21 first steps: state from zero (cold) or v = g, h = g, hbar = mean h (warm).
  for (const ArcFeedbackTensor& t : bucket) {
    if (!ef21 || t.started || !t.elements) continue;
    k.fill(t.h, t.elements, 0.0f);
    k.fill(t.hbar, t.elements, 0.0f);
    if (momentum) k.fill(t.v, t.elements, 0.0f);
  }
  if (ef21 && !p.warm.empty()) {
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
    float* const x = has_x ? work + p.work_at[j] : nullptr;
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
      case FeedbackKind::kEfm:  // x, formed in e above
        c.input = t.e;
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
    if (p.kind == FeedbackKind::kEf14 || efm) {
      k.subtract(inner[j].input, inner[j].contribution, t.e, n);  // e = x - C_i(x)
      if (efm && p.mask[j]) k.clear_where_sent(inner[j].contribution, t.v, n);
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
