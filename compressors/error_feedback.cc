#include "compressors/error_feedback.h"

#include <cstring>

#include "compressors/dense_mean.h"
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

}  // namespace

std::unique_ptr<Compressor> with_error_feedback(std::unique_ptr<Compressor> inner,
                                                const std::string& kind, StateStore& store) {
  if (kind == "ef14") {
    return std::make_unique<ErrorFeedback>(std::move(inner), ErrorFeedback::Kind::kEf14, store);
  }
  if (kind == "ef21") {
    return std::make_unique<ErrorFeedback>(std::move(inner), ErrorFeedback::Kind::kEf21, store);
  }
  if (kind == "ef21m") {
    return std::make_unique<ErrorFeedback>(std::move(inner), ErrorFeedback::Kind::kEf21m, store);
  }
  return inner;
}

void ErrorFeedback::reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  if (kind_ == Kind::kEf14) {
    reduce_ef14(bucket, ctx);
  } else {
    reduce_ef21(bucket, ctx);
  }
}

void ErrorFeedback::reduce_ef14(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  if (work_.size() < bucket.size()) {
    work_.resize(bucket.size());
    own_.resize(bucket.size());
    mean_.resize(bucket.size());
  }
  auto& x = work_;
  auto& own = own_;
  std::vector<CompressTensor> inner = bucket;
  for (size_t i = 0; i < bucket.size(); ++i) {
    TensorState& s = store_.get(bucket[i].name, bucket[i].elements);
    if (s.e.size() != s.elements) s.e.assign(s.elements, 0.0f);
    x[i].resize(bucket[i].elements);
    std::memcpy(x[i].data(), bucket[i].input, bucket[i].elements * sizeof(float));
    kernels::axpby(1.0f, s.e.data(), 1.0f, x[i].data(), x[i].size());  // x = g + e
    own[i].resize(x[i].size());
    inner[i].input = x[i].data();
    // The inner output is this decorator's output, which must be complete: no sparse results.
    inner[i].contribution = own[i].data();
  }
  inner_->reduce(inner, ctx);
  for (size_t i = 0; i < bucket.size(); ++i) {
    TensorState& s = store_.get(bucket[i].name, bucket[i].elements);
    kernels::subtract(x[i].data(), own[i].data(), s.e.data(), x[i].size());  // e = x - C_i(x)
    s.ef_started = true;
    if (bucket[i].contribution) {
      std::memcpy(bucket[i].contribution, own[i].data(), own[i].size() * sizeof(float));
    }
  }
}

void ErrorFeedback::reduce_ef21(std::vector<CompressTensor>& bucket, CompressContext& ctx) {
  const bool warm = ctx.config.ef_init == "warm";
  const float eta = kind_ == Kind::kEf21m ? static_cast<float>(ctx.config.ef_momentum) : 1.0f;
  std::vector<CompressTensor> first;       // warm start: dense mean of the source
  std::vector<CompressTensor> compressed;  // c = C(source - h)
  std::vector<size_t> first_of, compressed_of;
  if (work_.size() < bucket.size()) {
    work_.resize(bucket.size());
    own_.resize(bucket.size());
    mean_.resize(bucket.size());
  }
  auto& diff = work_;
  auto& own = own_;
  auto& mean = mean_;
  for (size_t i = 0; i < bucket.size(); ++i) {
    CompressTensor& t = bucket[i];
    TensorState& s = store_.get(t.name, t.elements);
    const size_t n = t.elements;
    if (!s.ef_started) {
      s.h.assign(n, 0.0f);
      s.hbar.assign(n, 0.0f);
      if (kind_ == Kind::kEf21m) s.v.assign(n, 0.0f);
      if (warm) {  // v = g, h = v, hbar = mean h (one dense reduction)
        if (kind_ == Kind::kEf21m) s.v.assign(t.input, t.input + n);
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
    diff[i].resize(n);
    if (kind_ == Kind::kEf21m) {
      kernels::momentum_diff(t.input, s.v.data(), s.h.data(), eta, diff[i].data(), n);
    } else {
      kernels::subtract(t.input, s.h.data(), diff[i].data(), n);
    }
    own[i].resize(t.elements);
    mean[i].resize(t.elements);
    CompressTensor c = t;
    c.input = diff[i].data();
    c.output = mean[i].data();
    c.contribution = own[i].data();
    c.allow_sparse = true;
    compressed.push_back(c);
    compressed_of.push_back(i);
  }
  if (!first.empty()) {
    std::vector<CompressTensor*> pointers;
    for (auto& f : first) pointers.push_back(&f);
    dense_mean(pointers, ctx.comm);  // hbar = mean h
  }
  if (!compressed.empty()) inner_->reduce(compressed, ctx);
  for (size_t j = 0; j < compressed.size(); ++j) {
    const size_t i = compressed_of[j];
    TensorState& s = store_.get(bucket[i].name, bucket[i].elements);
    add_on_support(compressed[j], own[i].data(), s.h.data());      // h += C_i
    add_on_support(compressed[j], mean[i].data(), s.hbar.data());  // hbar += mean c
  }
  for (size_t i = 0; i < bucket.size(); ++i) {
    CompressTensor& t = bucket[i];
    TensorState& s = store_.get(t.name, t.elements);
    s.ef_started = true;
    if (t.elements) std::memcpy(t.output, s.hbar.data(), t.elements * sizeof(float));
    // What this rank put into the global estimate: its h moved by C_i (or to h on the first step).
    if (t.contribution && t.elements)
      std::memcpy(t.contribution, s.h.data(), t.elements * sizeof(float));
  }
}

}  // namespace arcreduce
