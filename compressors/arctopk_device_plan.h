// ARC-Top-K on one bucket as a fixed sequence of calls into the shared kernels (the "device
// plan", docs/cuda.md). The plan is made on the host from shapes only (paths, k, buffer
// offsets), so no value has to leave the device to size the work; run_arctopk_plan() then issues
// the kernel calls on a backend: CpuArcKernels (kernels.h, used by the tests to prove the plan
// equal to ArcTopK) or the CUDA backend (compressors/kernels/arc_plan_cuda.h, kernels_cuda.h on
// the runtime stream). The two collectives go through `allreduce(float* data, size_t n)`, which
// sums n floats in place across ranks (the caller stages them through pinned memory when MPI is
// not CUDA-aware). Only non-lazy inputs, dense outputs (allow_sparse off) and no consistency
// hash: the error-feedback decorators are applied by the caller around it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "arcreduce/compressor_stats.h"
#include "arcreduce/status.h"
#include "compressors/arc_path.h"
#include "compressors/compressor_options.h"
#include "compressors/kernels/kernels.h"
#include "compressors/matrix_view.h"
#include "tensor_queue/message.h"

namespace arcreduce {

// One tensor of the bucket; the pointers are backend memory (device memory for CUDA).
struct ArcTopKPlanTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t elements = 0;
  uint64_t step = 0;
  const float* input = nullptr;
  float* output = nullptr;        // mean over ranks of the compressed contributions
  float* contribution = nullptr;  // this rank's compressed contribution, or null
};

struct ArcTopKPlan {
  // The same paths as ArcTopK's (arc_path()).
  using Path = ArcPath;
  struct Item {
    Path path = Path::kDense;
    int64_t n = 0, m = 0, k = 0;
    uint64_t key = 0;   // Philox key of the projection (sketch path)
    size_t first = 0;   // offset in the first (sketch) buffer
    size_t second = 0;  // offset in the second (values) buffer
    size_t rows = 0;    // offset in the row-index buffer
    // ARCREDUCE_RANDOM_ROWS: rows drawn at random (their indices follow the k selected ones in
    // the row-index buffer) and the key of their draw.
    int64_t random = 0;
    uint64_t random_key = 0;
  };
  std::vector<Item> items;
  int r = 0;
  float inv_n = 1.0f;
  size_t first_floats = 0, second_floats = 0, row_count = 0;
  // One tensor's transposed projection, scores, rows; then the random draw's normal values and
  // its infinities.
  size_t scratch_floats = 0;
  // What ArcTopK adds to CompressorStats for the same bucket.
  uint64_t sketch_bytes = 0, value_bytes = 0, selected_rows = 0, dense_fallbacks = 0;
};

// Scratch floats the selection of `it` uses before the random draw's (run_arctopk_plan): the
// transposed projection and the scores (sketch path), the scores and the packed rows (exact
// path), the scores (random path).
inline size_t selection_scratch(const ArcTopKPlan::Item& it, int r) {
  switch (it.path) {
    case ArcTopKPlan::Path::kSketch:
      return static_cast<size_t>(it.m * r + it.n);
    case ArcTopKPlan::Path::kExact:
      return static_cast<size_t>(it.n + it.k * it.m);
    default:
      return static_cast<size_t>(it.n);
  }
}

// The same path decisions as ArcTopK::reduce. Throws Error naming the tensor for a tensor whose
// element count does not match its shape.
inline ArcTopKPlan plan_arctopk(const std::vector<ArcTopKPlanTensor>& tensors,
                                const CompressorOptions& options, const CompressionSpec& spec,
                                int world_size) {
  ArcTopKPlan plan;
  plan.r = options.arctopk.sketch_rank;
  plan.inv_n = 1.0f / static_cast<float>(world_size);
  const int r = plan.r;
  for (const ArcTopKPlanTensor& t : tensors) {
    size_t product = 1;
    for (int64_t s : t.shape) product *= static_cast<size_t>(s < 0 ? 0 : s);
    if (product != t.elements) {
      throw Error("tensor '" + t.name + "': " + std::to_string(t.elements) +
                  " elements do not match its shape (ARC-Top-K device plan)");
    }
    ArcTopKPlan::Item it;
    const ArcTensorPath choice = arc_path(t.shape, t.elements, spec.ratio, options);
    it.path = choice.path;
    if (it.path != ArcTopKPlan::Path::kDense) {
      it.n = choice.view.rows;
      it.m = choice.view.cols;
      it.k = choice.k;
    }
    it.first = plan.first_floats;
    if (it.path == ArcTopKPlan::Path::kSketch) {
      it.key = kernels::philox_key(options.seed, t.name, t.step);
      plan.first_floats += static_cast<size_t>(it.n) * r;
      plan.sketch_bytes += static_cast<uint64_t>(it.n) * r * sizeof(float);
      it.second = plan.second_floats;
      plan.second_floats += static_cast<size_t>(it.k) * it.m;
      plan.value_bytes += static_cast<uint64_t>(it.k) * it.m * sizeof(float);
      plan.scratch_floats = std::max(plan.scratch_floats, static_cast<size_t>(it.m * r + it.n));
    } else if (it.path == ArcTopKPlan::Path::kRandom) {
      it.second = plan.second_floats;
      plan.second_floats += static_cast<size_t>(it.k) * it.m;
      plan.value_bytes += static_cast<uint64_t>(it.k) * it.m * sizeof(float);
      plan.scratch_floats = std::max(plan.scratch_floats, static_cast<size_t>(it.n));
    } else {
      plan.first_floats += t.elements;
      plan.value_bytes += t.elements * sizeof(float);
      if (it.path == ArcTopKPlan::Path::kDense) ++plan.dense_fallbacks;
      if (it.path == ArcTopKPlan::Path::kExact) {
        plan.scratch_floats =
            std::max(plan.scratch_floats, static_cast<size_t>(it.n + it.k * it.m));
      }
    }
    if (it.path != ArcTopKPlan::Path::kDense) {
      it.random = random_row_count(options.arctopk.random_rows, it.k);
      if (it.random) {
        it.random_key = random_rows_key(options.seed, t.name, t.step);
        plan.scratch_floats = std::max(
            plan.scratch_floats, selection_scratch(it, r) + static_cast<size_t>(it.n + it.random));
      }
      it.rows = plan.row_count;
      plan.row_count += static_cast<size_t>(it.k + it.random);
      plan.selected_rows += static_cast<uint64_t>(it.k);
    }
    plan.items.push_back(it);
  }
  return plan;
}

// Buffers of the backend's memory, sized by the plan.
struct ArcTopKPlanBuffers {
  float* first = nullptr;    // plan.first_floats
  float* second = nullptr;   // plan.second_floats
  int64_t* rows = nullptr;   // plan.row_count
  float* scratch = nullptr;  // plan.scratch_floats
};

// Issues the plan: K provides the kernels of kernels.h (same names and arguments) plus
// copy(dst, src, n) (the feedback pipeline, arctopk_device_feedback.h, also axpby, subtract,
// momentum_diff and clear_where_sent). Bit-identical to ArcTopK::reduce for the same backend build.
template <class K, class Allreduce>
void run_arctopk_plan(K& k, const ArcTopKPlan& plan, const std::vector<ArcTopKPlanTensor>& tensors,
                      const ArcTopKPlanBuffers& buf, Allreduce&& allreduce) {
  using Path = ArcTopKPlan::Path;
  const int r = plan.r;
  float* scratch = buf.scratch;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ArcTopKPlan::Item& it = plan.items[i];
    const ArcTopKPlanTensor& t = tensors[i];
    if (it.path == Path::kSketch) {
      float* transposed = scratch;
      k.fill_gaussian_transposed(it.key, it.m, r, transposed);
      k.sketch_transposed(t.input, it.n, it.m, transposed, r, buf.first + it.first);
    } else if (it.path != Path::kRandom && t.elements) {
      k.copy(buf.first + it.first, t.input, t.elements);
    }
  }
  if (plan.first_floats) allreduce(buf.first, plan.first_floats);

  // Selection: identical on every rank because it only reads summed data.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ArcTopKPlan::Item& it = plan.items[i];
    const ArcTopKPlanTensor& t = tensors[i];
    if (it.path == Path::kDense) {
      if (t.elements) {
        k.copy(t.output, buf.first + it.first, t.elements);
        k.scale(t.output, t.elements, plan.inv_n);
        if (t.contribution) k.copy(t.contribution, t.input, t.elements);
      }
      continue;
    }
    float* scores = scratch + (it.path == Path::kSketch ? it.m * r : 0);
    int64_t* rows = buf.rows + it.rows;
    if (it.path == Path::kExact) {
      k.row_sq_norms(buf.first + it.first, it.n, it.m, scores);
    } else if (it.path == Path::kSketch) {
      k.sketch_row_scores(buf.first + it.first, it.n, r, scores);
    } else {
      k.fill(scores, static_cast<size_t>(it.n), 0.0f);  // every row is drawn below
    }
    if (it.random) {  // as mark_random_rows() in arctopk.cc
      float* normal = scratch + selection_scratch(it, r);
      float* infinities = normal + it.n;
      int64_t* drawn = rows + it.k;
      k.fill_gaussian(it.random_key, normal, static_cast<size_t>(it.n));
      k.top_k_rows(normal, it.n, it.random, drawn);
      k.fill(infinities, static_cast<size_t>(it.random), std::numeric_limits<float>::infinity());
      k.scatter_rows(infinities, 1, drawn, it.random, scores);
    }
    k.top_k_rows(scores, it.n, it.k, rows);
    if (arc_sends_rows(it.path)) {
      float* own_rows = buf.second + it.second;
      k.gather_rows(t.input, it.m, rows, it.k, own_rows);
      if (t.contribution) {
        k.fill(t.contribution, t.elements, 0.0f);
        k.scatter_rows(own_rows, it.m, rows, it.k, t.contribution);
      }
    }
  }
  if (plan.second_floats) {
    allreduce(buf.second, plan.second_floats);
    k.scale(buf.second, plan.second_floats, plan.inv_n);
  }

  for (size_t i = 0; i < tensors.size(); ++i) {
    const ArcTopKPlan::Item& it = plan.items[i];
    const ArcTopKPlanTensor& t = tensors[i];
    if (it.path == Path::kDense) continue;
    const int64_t* rows = buf.rows + it.rows;
    const size_t row_block = static_cast<size_t>(it.k) * it.m;
    k.fill(t.output, t.elements, 0.0f);
    if (arc_sends_rows(it.path)) {
      k.scatter_rows(buf.second + it.second, it.m, rows, it.k, t.output);
      continue;
    }
    float* packed = scratch + it.n;
    k.gather_rows(buf.first + it.first, it.m, rows, it.k, packed);
    k.scale(packed, row_block, plan.inv_n);
    k.scatter_rows(packed, it.m, rows, it.k, t.output);
    if (t.contribution) {
      k.fill(t.contribution, t.elements, 0.0f);
      k.gather_rows(t.input, it.m, rows, it.k, packed);
      k.scatter_rows(packed, it.m, rows, it.k, t.contribution);
    }
  }
}

// The CPU build of the kernels as a plan backend (host memory).
struct CpuArcKernels {
  void fill_gaussian(uint64_t key, float* out, size_t n) { kernels::fill_gaussian(key, out, n); }
  void fill_gaussian_transposed(uint64_t key, int64_t m, int r, float* vt) {
    kernels::fill_gaussian_transposed(key, m, r, vt);
  }
  void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p) {
    kernels::sketch_transposed(y, n, m, vt, r, p);
  }
  void sketch_row_scores(const float* p, int64_t n, int r, float* s) {
    kernels::sketch_row_scores(p, n, r, s);
  }
  void row_sq_norms(const float* y, int64_t n, int64_t m, float* s) {
    kernels::row_sq_norms(y, n, m, s);
  }
  void top_k_rows(const float* s, int64_t n, int64_t k, int64_t* rows) {
    kernels::top_k_rows(s, n, k, rows);
  }
  void gather_rows(const float* y, int64_t m, const int64_t* rows, int64_t k, float* packed) {
    kernels::gather_rows(y, m, rows, k, packed);
  }
  void scatter_rows(const float* packed, int64_t m, const int64_t* rows, int64_t k, float* y) {
    kernels::scatter_rows(packed, m, rows, k, y);
  }
  void fill(float* y, size_t n, float v) { kernels::fill(y, n, v); }
  void scale(float* y, size_t n, float a) { kernels::scale(y, n, a); }
  void axpby(float a, const float* x, float b, float* y, size_t n) {
    kernels::axpby(a, x, b, y, n);
  }
  void subtract(const float* x, const float* y, float* out, size_t n) {
    kernels::subtract(x, y, out, n);
  }
  void momentum_diff(const float* g, float* v, const float* h, float eta, float* diff, size_t n) {
    kernels::momentum_diff(g, v, h, eta, diff, n);
  }
  void clear_where_sent(const float* sent, float* u, size_t n) {
    kernels::clear_where_sent(sent, u, n);
  }
  void copy(float* dst, const float* src, size_t n) {
    if (n) std::memcpy(dst, src, n * sizeof(float));
  }
};

}  // namespace arcreduce
