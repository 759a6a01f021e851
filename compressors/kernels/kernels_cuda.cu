// The CUDA build of the kernels: kernels_impl.h instantiated with Thrust's CUDA system on the
// caller's stream (par_nosync: Thrust synchronises only where a result must reach the host),
// with scratch memory from a stream-ordered pool.
#include "compressors/kernels/kernels_cuda.h"

#include <thrust/system/cuda/error.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system_error.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "compressors/kernels/kernels_impl.h"

namespace arcreduce {
namespace kernels {
namespace cuda {
namespace {

[[noreturn]] void throw_scratch_error(cudaError_t rc, const std::string& what) {
  throw ::thrust::system_error(rc, ::thrust::cuda_category(), what);
}

// The current device's pool for kernel scratch, or null where the device has no memory pools.
// The pool keeps what it once allocated (no release threshold), so it holds the largest
// concurrent scratch seen, reused by every later call instead of returned at each
// synchronisation.
cudaMemPool_t scratch_pool() {
  int device = 0;
  cudaError_t rc = cudaGetDevice(&device);
  if (rc != cudaSuccess) throw_scratch_error(rc, "cudaGetDevice for kernel scratch");
  static std::mutex mutex;
  static std::map<int, cudaMemPool_t> pools;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = pools.find(device);
  if (it != pools.end()) return it->second;
  int supported = 0;
  rc = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device);
  cudaMemPool_t pool = nullptr;
  if (rc == cudaSuccess && supported != 0) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    rc = cudaMemPoolCreate(&pool, &props);
    if (rc != cudaSuccess) throw_scratch_error(rc, "cudaMemPoolCreate for kernel scratch");
    uint64_t keep_all = UINT64_MAX;
    rc = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
    if (rc != cudaSuccess) {
      (void)cudaMemPoolDestroy(pool);
      throw_scratch_error(rc, "cudaMemPoolSetAttribute for kernel scratch");
    }
  }
  pools.emplace(device, pool);
  return pool;
}

// Thrust's allocator for temporary storage (sorts, selection candidates, the sketch's lane
// sums). Thrust's default, cudaMalloc and cudaFree, synchronises the device on every call; a
// kernel such as top_k_rows makes several. Here memory is taken and given back in stream order
// on the kernel's stream: no synchronisation, and after the first calls no new memory.
class StreamScratch {
 public:
  using value_type = char;
  explicit StreamScratch(cudaStream_t stream) : stream_(stream) {}

  char* allocate(size_t bytes) {
    if (!looked_up_) {  // only kernels that need scratch pay for the lookup
      pool_ = scratch_pool();
      looked_up_ = true;
    }
    void* p = nullptr;
    const cudaError_t rc = pool_ != nullptr ? cudaMallocFromPoolAsync(&p, bytes, pool_, stream_)
                                            : cudaMalloc(&p, bytes);
    if (rc != cudaSuccess) {
      throw_scratch_error(rc, "allocating " + std::to_string(bytes) + " bytes of kernel scratch");
    }
    return static_cast<char*>(p);
  }
  void deallocate(char* p, size_t) {
    // Must not throw; a failure here resurfaces at the stream's next call.
    if (pool_ != nullptr) {
      (void)cudaFreeAsync(p, stream_);
    } else {
      (void)cudaFree(p);
    }
  }

 private:
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
  bool looked_up_ = false;
};

// Runs one kernel with a policy on `stream` whose scratch comes from StreamScratch; the
// allocator lives as long as the call.
template <class F>
auto on_stream(cudaStream_t stream, F&& f) {
  StreamScratch scratch(stream);
  return f(::thrust::cuda::par_nosync(scratch).on(stream));
}

// Up to this many rows a sort selects without synchronising the stream (select_impl.h); above
// it the sampled selection's passes over n cost less than sorting n keys (the crossover was
// measured on a GPU: docs/results/cuda-log.md).
constexpr int64_t kSortSelectMaxRows = int64_t{1} << 20;

}  // namespace

void fill_gaussian(uint64_t key, float* out, size_t n, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::fill_gaussian(exec, key, out, n); });
}

void fill_gaussian_transposed(uint64_t key, int64_t m, int r, float* vt, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::fill_gaussian_transposed(exec, key, m, r, vt); });
}
void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p,
                       cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::sketch_transposed_lanes(exec, y, n, m, vt, r, p); });
}
void sketch_row_scores(const float* p, int64_t n, int r, float* scores, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::sketch_row_scores(exec, p, n, r, scores); });
}
void row_sq_norms(const float* y, int64_t n, int64_t m, float* scores, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::row_sq_norms(exec, y, n, m, scores); });
}
void top_k_rows(const float* scores, int64_t n, int64_t k, int64_t* rows, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) {
    if (n <= kSortSelectMaxRows) {
      impl::top_k_rows_by_sort(exec, scores, n, k, rows);
    } else {
      impl::top_k_rows(exec, scores, n, k, rows);
    }
  });
}
void gather_rows(const float* y, int64_t m, const int64_t* rows, int64_t k, float* packed,
                 cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::gather_rows_elements(exec, y, m, rows, k, packed); });
}
void scatter_rows(const float* packed, int64_t m, const int64_t* rows, int64_t k, float* y,
                  cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::scatter_rows_elements(exec, packed, m, rows, k, y); });
}

void top_k_abs(const float* x, int64_t n, int64_t k, int64_t* indices, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::top_k_abs(exec, x, n, k, indices); });
}
void gather(const float* x, const int64_t* indices, int64_t k, float* out, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::gather(exec, x, indices, k, out); });
}
void scatter_add(const float* values, const int64_t* indices, int64_t k, float alpha, float* y,
                 cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::scatter_add(exec, values, indices, k, alpha, y); });
}
void scatter(const float* values, const int64_t* indices, int64_t k, float* y,
             cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::scatter(exec, values, indices, k, y); });
}

void fill(float* y, size_t n, float value, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::fill(exec, y, n, value); });
}
void scale(float* y, size_t n, float alpha, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::scale(exec, y, n, alpha); });
}
void axpby(float a, const float* x, float b, float* y, size_t n, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::axpby(exec, a, x, b, y, n); });
}
void subtract(const float* x, const float* y, float* out, size_t n, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::subtract(exec, x, y, out, n); });
}
void clear_where_sent(const float* sent, float* u, size_t n, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::clear_where_sent(exec, sent, u, n); });
}
void momentum_diff(const float* g, float* v, const float* h, float eta, float* diff, size_t n,
                   cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::momentum_diff(exec, g, v, h, eta, diff, n); });
}
void momentum_diff_restart(const float* g, float* v, const float* h, const float* hbar, float eta,
                           float* diff, float* out, size_t n, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) {
    impl::momentum_diff_restart(exec, g, v, h, hbar, eta, diff, out, n);
  });
}

void to_float(const void* src, DType dtype, float* dst, size_t n, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::to_float(exec, src, dtype, dst, n); });
}
void from_float(const float* src, DType dtype, void* dst, size_t n, cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::from_float(exec, src, dtype, dst, n); });
}

uint64_t hash_indices(const int64_t* indices, int64_t k, cudaStream_t stream) {
  return on_stream(stream, [&](auto exec) { return impl::hash_indices(exec, indices, k); });
}

namespace detail {
void top_k_rows_by_sort(const float* scores, int64_t n, int64_t k, int64_t* rows,
                        cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::top_k_rows_by_sort(exec, scores, n, k, rows); });
}
void top_k_rows_sampled(const float* scores, int64_t n, int64_t k, int64_t* rows,
                        cudaStream_t stream) {
  on_stream(stream, [&](auto exec) { impl::top_k_rows(exec, scores, n, k, rows); });
}
}  // namespace detail

}  // namespace cuda
}  // namespace kernels
}  // namespace arcreduce
