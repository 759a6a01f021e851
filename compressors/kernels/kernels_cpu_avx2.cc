// Compiled with -mavx2 -mfma (cmake/kernels.cmake) and only reached after avx2::available().
// Its own ABI namespace keeps every instantiation apart from the portable build's, so the linker
// cannot hand AVX2 code to the portable path.
#define ARC_KERNELS_ABI host_avx2_v1
#include "compressors/kernels/kernels_cpu_avx2.h"

#include <thrust/system/cpp/execution_policy.h>

#include "compressors/kernels/kernels_impl.h"

namespace arcreduce {
namespace kernels {
namespace avx2 {

void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p) {
  impl::sketch_transposed(thrust::cpp::par, y, n, m, vt, r, p);
}

}  // namespace avx2
}  // namespace kernels
}  // namespace arcreduce
