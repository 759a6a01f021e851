#include "compressors/error_feedback.h"

#include <cstring>

#include "compressors/dense_mean.h"
#include "compressors/feedback_kinds.h"
#include "compressors/kernels/kernels.h"

namespace arcreduce {

namespace {

// dst += src, only on the compressor's reported support (the rest of src is zero).
void add_on_support(const CompressTensor& c, const float* src, float* dst) {
  if (!c.sparse) {
    kernels::axpby(1.0f, src, 1.0f, dst, c.elements);
    return;
  }
  for (int64_t row : c.rows) {
    const size_t at = static_cast<size_t>(row * c.row_length);
    kernels::axpby(1.0f, src + at, 1.0f, dst + at, static_cast<size_t>(c.row_length));
  }
}

// y = 0 outside the rows a row-sparse compressor reported for c (the rows are left as they are).
void zero_outside_rows(const CompressTensor& c, float* y) {
  const auto m = static_cast<size_t>(c.row_length);
  size_t done = 0;
  for (int64_t row : c.rows) {
    const size_t begin = static_cast<size_t>(row) * m;
    kernels::fill(y + done, begin - done, 0.0f);
    done = begin + m;
  }
  kernels::fill(y + done, c.elements - done, 0.0f);
}

// ef14 and efm's x = (g or u) + e, formed while a compressor that accepts lazy input streams
// it: one pass updates u and e (which becomes x) and hands x over, so the sketch reads it from
// cache instead of memory. The same pass zeroes the block of the decorator's output, which the
// compressor writes only after the whole stream (it may alias g, whose block has been read by
// then): what the compressor reports on its rows then completes the output, without a pass of
// zeros of its own.
class AccumulateStream final : public LazyInput {
 public:
  AccumulateStream(const float* g, float* u, float beta, float* e, float* output)
      : g_(g), u_(u), beta_(beta), e_(e), output_(output) {}
  void stream(size_t begin, size_t end, float* out) override {
    const size_t n = end - begin;
    kernels::accumulate_feedback(g_ + begin, u_ ? u_ + begin : nullptr, beta_, e_ + begin, out, n);
    if (output_ && n) std::memset(output_ + begin, 0, n * sizeof(float));
  }
  void gather_rows(const int64_t* rows, int64_t k, int64_t row_length, float* packed) override {
    kernels::gather_rows(e_, row_length, rows, k, packed);  // e holds x after the stream
  }

 private:
  const float* g_;
  float* u_;  // null for ef14
  float beta_;
  float* e_;
  float* output_;
};

}  // namespace

std::unique_ptr<Compressor> with_error_feedback(std::unique_ptr<Compressor> inner,
                                                const std::string& kind, StateStore& store) {
  const FeedbackRow* row = find_feedback(kind);
  ErrorFeedback::Kind decorator;
  switch (row ? row->kind : FeedbackKind::kNone) {
    case FeedbackKind::kEf14:
      decorator = ErrorFeedback::Kind::kEf14;
      break;
    case FeedbackKind::kEf21:
      decorator = ErrorFeedback::Kind::kEf21;
      break;
    case FeedbackKind::kEf21m:
      decorator = ErrorFeedback::Kind::kEf21m;
      break;
    case FeedbackKind::kEfm:
      decorator = ErrorFeedback::Kind::kEfm;
      break;
    default:
      return inner;
  }
  return std::make_unique<ErrorFeedback>(std::move(inner), decorator, store);
}

void ErrorFeedback::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  if (kind_ == Kind::kEf14 || kind_ == Kind::kEfm) {
    reduce_ef14(bucket, ctx);
  } else {
    reduce_ef21(bucket, ctx);
  }
}

// ef14 and efm form x in the residual's own memory (e += g, or u = beta u + g and e += u, in one
// pass), hand e to the inner compressor as its input (or stream it, AccumulateStream, to one that
// accepts lazy input: then x never makes a round trip through memory before the sketch), and
// afterwards take this rank's contribution back out of it (e -= C_i(x)) only on the rows a
// row-sparse compressor reports: one pass over the tensor instead of seven, with the same
// arithmetic (float addition commutes), so the results are bit for bit those of forming x in a
// scratch buffer. If a collective fails, e holds x: the job ends with that error anyway.
void ErrorFeedback::reduce_ef14(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  const bool momentum = kind_ == Kind::kEfm;
  const float beta = 1.0f - static_cast<float>(ctx.options.feedback.eta);
  // Scratch offsets first: the buffer may move while it grows.
  std::vector<size_t> at(bucket.size());
  own_.clear();
  for (size_t i = 0; i < bucket.size(); ++i) at[i] = own_.append(bucket[i].elements);
  // efm reaches here during ARCREDUCE_WARMUP_STEPS too (the executor leaves its warm-up to it):
  // those tensors send their whole x densely, so that the warm-up keeps the momentum the user's
  // optimizer no longer has.
  std::vector<CompressTensor> inner, warm;
  std::vector<size_t> inner_of;
  std::vector<TensorState*> state(bucket.size());  // the store's entries do not move
  const bool lazy = inner_->accepts_lazy_input();
  std::vector<AccumulateStream> streams;  // lazy: one per inner tensor
  streams.reserve(bucket.size());         // inner[j].lazy points into it
  for (size_t i = 0; i < bucket.size(); ++i) {
    TensorState& s = *(state[i] = &store_.get(bucket[i].name, bucket[i].elements));
    if (s.e.size() != s.elements) s.e.assign(s.elements, 0.0f);
    const size_t n = bucket[i].elements;
    // The velocity lives in v. ef21m's v (a normalised average, kept with h and hbar) is not one:
    // a state that holds h was ef21m's, and efm starts its velocity over.
    if (momentum && (!s.ef_started || s.v.size() != n || !s.h.empty())) {
      s.v.assign(n, 0.0f);
      s.h.clear();
      s.hbar.clear();
    }
    float* u = momentum ? s.v.data() : nullptr;
    CompressTensor c = bucket[i];
    c.input = s.e.data();
    c.contribution = own_.at(at[i]);
    // The executor sends every reduction of an efm tensor here, so its compressed-step count is
    // its reduction count.
    if (momentum && (ctx.options.feedback.dense ||
                     static_cast<int64_t>(bucket[i].step) < ctx.options.feedback.warmup_steps)) {
      // ARCREDUCE_AUTO_COMPRESS's dense steps drop the residual of earlier compressed steps:
      // sent at once it would be one outsized step (the momentum u keeps their gradients).
      if (ctx.options.feedback.dense) kernels::fill(s.e.data(), n, 0.0f);
      // u = beta u + g, e becomes x = u + e
      kernels::accumulate_feedback(bucket[i].input, u, beta, s.e.data(), nullptr, n);
      warm.push_back(c);
      continue;
    }
    // Row-sparse results are welcome: the decorator completes the output itself.
    c.allow_sparse = true;
    if (lazy) {
      streams.emplace_back(bucket[i].input, u, beta, s.e.data(), c.output);
      c.input = nullptr;
      c.lazy = &streams.back();
    } else {
      kernels::accumulate_feedback(bucket[i].input, u, beta, s.e.data(), nullptr, n);
    }
    inner.push_back(c);
    inner_of.push_back(i);
  }
  if (!warm.empty()) {
    ctx.stats.warmup_tensors += warm.size();
    begin_phase(ctx, "warm-up collective", "communicate");
    std::vector<CompressTensor*> pointers;
    for (auto& w : warm) pointers.push_back(&w);
    dense_mean(pointers, ctx.comm);
  }
  if (!inner.empty()) inner_->reduce(inner, ctx);
  begin_phase(ctx, "error feedback", "decompress");
  for (size_t i = 0; i < bucket.size(); ++i) {
    state[i]->ef_started = true;
    float* out = bucket[i].contribution;  // the caller's copy of C_i(x)
    if (out && bucket[i].elements) {
      std::memcpy(out, own_.at(at[i]), bucket[i].elements * sizeof(float));
    }
  }
  for (const CompressTensor& w : warm) {  // everything was sent: e = x - x = 0
    kernels::fill(store_.get(w.name, w.elements).e.data(), w.elements, 0.0f);
  }
  const bool masking = momentum && ctx.options.feedback.masking;
  for (size_t j = 0; j < inner.size(); ++j) {
    const CompressTensor& c = inner[j];
    TensorState& s = *state[inner_of[j]];
    const float* own = c.contribution;
    // Masking pays where a sent row has waited long: its velocity then carries gradients many
    // steps old, which would go on pushing after the row was delivered. A row-selected tensor that
    // sends at least the share eta (ARCREDUCE_EF_ETA, 1 - beta) of its rows per step (each
    // row about every 1/eta steps, within the momentum's horizon) keeps its velocity as heavy-ball
    // SGD does, so that a larger ratio trains more like dense, not less: at ratio 1 masking would
    // clear every velocity and leave SGD without momentum. Tensors without reported rows (sent
    // densely, or Top-K's and Rand-K's entries) are masked where sent: sparing the small ones
    // ARC-Top-K sends densely (biases) cost accuracy (docs/time-to-accuracy.md, "Masking at
    // larger ratios").
    const bool mask =
        masking && !(c.sparse && static_cast<double>(c.rows.size()) * c.row_length >=
                                     ctx.options.feedback.eta * static_cast<double>(c.elements));
    // The same on the whole tensor or on each reported row: e -= C_i(x), and with masking the
    // velocity cleared where C_i(x) is non-zero.
    auto settle = [&](size_t begin, size_t count) {
      kernels::subtract(s.e.data() + begin, own + begin, s.e.data() + begin, count);
      if (!mask) return;
      kernels::clear_where_sent(own + begin, s.v.data() + begin, count);
    };
    if (!c.sparse) {
      settle(0, c.elements);
      continue;
    }
    const auto m = static_cast<size_t>(c.row_length);
    for (int64_t row : c.rows) settle(static_cast<size_t>(row) * m, m);
    if (!c.lazy) zero_outside_rows(c, c.output);  // a stream zeroed it (AccumulateStream)
    float* out = bucket[inner_of[j]].contribution;
    if (out) zero_outside_rows(c, out);  // the copy above has the rows; the rest was unwritten
  }
}

namespace {

// The EF21 difference g - h (or, for EF21M, v - h after v = (1 - eta) v + eta g), produced on
// demand for compressors that accept lazy inputs: the momentum update happens while streaming.
// Where it can, the same pass starts the decorator's output as the old hbar (the reduction then
// adds mean c on its support), so that copy costs no pass of its own. The output may alias g,
// whose block has been read by then; but EF21 gathers its selected rows from g later, so over an
// aliased g the output is left alone (fills_output() false).
class DifferenceStream final : public LazyInput {
 public:
  DifferenceStream(const float* g, float* v, const float* h, const float* hbar, float eta,
                   float* output)
      : g_(g), v_(v), h_(h), hbar_(hbar), eta_(eta), output_(v || output != g ? output : nullptr) {}
  bool fills_output() const { return output_ != nullptr; }
  void stream(size_t begin, size_t end, float* out) override {
    const size_t n = end - begin;
    if (v_) {  // EF21M always fills the output
      kernels::momentum_diff_restart(g_ + begin, v_ + begin, h_ + begin, hbar_ + begin, eta_, out,
                                     output_ + begin, n);
      return;
    }
    kernels::subtract(g_ + begin, h_ + begin, out, n);
    if (output_ && n) std::memcpy(output_ + begin, hbar_ + begin, n * sizeof(float));
  }
  void gather_rows(const int64_t* rows, int64_t k, int64_t row_length, float* packed) override {
    const float* source = v_ ? v_ : g_;  // v was updated by the stream
    const auto m = static_cast<size_t>(row_length);
    for (int64_t j = 0; j < k; ++j) {
      const auto at = static_cast<size_t>(rows[j]) * m;
      kernels::subtract(source + at, h_ + at, packed + static_cast<size_t>(j) * m, m);
    }
  }

 private:
  const float* g_;
  float* v_;  // null for EF21
  const float* h_;
  const float* hbar_;
  float eta_;
  float* output_;  // null: not filled
};

}  // namespace

void ErrorFeedback::reduce_ef21(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  const bool warm = ctx.options.feedback.init == FeedbackInit::kWarm;
  const bool momentum = kind_ == Kind::kEf21m;
  const float eta = momentum ? static_cast<float>(ctx.options.feedback.eta) : 1.0f;
  const bool lazy = inner_->accepts_lazy_input();
  std::vector<CompressTensor> first;       // warm start: dense mean of the source
  std::vector<CompressTensor> compressed;  // c = C(source - h)
  std::vector<size_t> first_of, compressed_of;
  std::vector<DifferenceStream> streams;  // lazy: one per compressed tensor
  std::vector<bool> output_done(bucket.size(), false);
  streams.reserve(bucket.size());  // compressed[j].lazy points into it
  work_.clear();
  own_.clear();
  mean_.clear();
  for (size_t i = 0; i < bucket.size(); ++i) {
    CompressTensor& t = bucket[i];
    TensorState& s = store_.get(t.name, t.elements);
    const size_t n = t.elements;
    // A state that another error feedback started (ef14 keeps only e; a per-op option or a
    // loaded state file may switch it) has no h and hbar to continue from: start over, as every
    // rank does for this tensor at this same step.
    if (!s.ef_started || s.h.size() != n || s.hbar.size() != n || (momentum && s.v.size() != n)) {
      s.h.assign(n, 0.0f);
      s.hbar.assign(n, 0.0f);
      if (momentum) s.v.assign(n, 0.0f);
      if (warm) {  // v = g, h = v, hbar = mean h (one dense reduction)
        if (momentum) s.v.assign(t.input, t.input + n);
        s.h.assign(t.input, t.input + n);
        CompressTensor f = t;
        f.input = s.h.data();
        f.output = s.hbar.data();
        f.contribution = nullptr;
        first.push_back(f);
        first_of.push_back(i);
        continue;
      }
    }
    CompressTensor c = t;
    c.allow_sparse = true;
    if (lazy) {
      streams.emplace_back(t.input, momentum ? s.v.data() : nullptr, s.h.data(), s.hbar.data(), eta,
                           t.output);
      c.input = nullptr;
      c.lazy = &streams.back();
    } else {
      c.input = nullptr;  // set below, once work_ stops growing
      work_.append(n);
    }
    own_.append(n);
    mean_.append(n);
    compressed.push_back(c);
    compressed_of.push_back(i);
  }
  // Scratch pointers, now that the buffers have their final size. The eager path computes the
  // whole difference first.
  for (size_t j = 0, at = 0; j < compressed.size(); at += compressed[j].elements, ++j) {
    CompressTensor& c = compressed[j];
    c.output = mean_.at(at);
    c.contribution = own_.at(at);
    if (lazy) continue;
    const CompressTensor& t = bucket[compressed_of[j]];
    TensorState& s = store_.get(t.name, t.elements);
    float* diff = work_.at(at);
    if (momentum) {
      kernels::momentum_diff(t.input, s.v.data(), s.h.data(), eta, diff, t.elements);
    } else {
      kernels::subtract(t.input, s.h.data(), diff, t.elements);
    }
    c.input = diff;
  }
  if (!first.empty()) {
    begin_phase(ctx, "warm start collective", "communicate");
    std::vector<CompressTensor*> pointers;
    for (auto& f : first) pointers.push_back(&f);
    dense_mean(pointers, ctx.comm);  // hbar = mean h
  }
  if (!compressed.empty()) inner_->reduce(compressed, ctx);
  begin_phase(ctx, "error feedback", "decompress");
  for (size_t j = 0; j < compressed.size(); ++j) {
    const size_t i = compressed_of[j];
    TensorState& s = store_.get(bucket[i].name, bucket[i].elements);
    add_on_support(compressed[j], compressed[j].contribution, s.h.data());  // h += C_i
    add_on_support(compressed[j], compressed[j].output, s.hbar.data());     // hbar += mean c
    // The stream left the old hbar in the output: the same additions make it the new one.
    if (lazy && streams[j].fills_output()) {
      add_on_support(compressed[j], compressed[j].output, bucket[i].output);
      output_done[i] = true;
    }
  }
  for (size_t i = 0; i < bucket.size(); ++i) {
    CompressTensor& t = bucket[i];
    TensorState& s = store_.get(t.name, t.elements);
    s.ef_started = true;
    if (!output_done[i] && t.elements) {
      std::memcpy(t.output, s.hbar.data(), t.elements * sizeof(float));
    }
    // What this rank put into the global estimate: its h moved by C_i (or to h on the first step).
    if (t.contribution && t.elements)
      std::memcpy(t.contribution, s.h.data(), t.elements * sizeof(float));
  }
}

}  // namespace arcreduce
