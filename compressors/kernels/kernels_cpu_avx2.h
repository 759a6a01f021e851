// The sketch written a second time for x86-64 CPUs with AVX2 and FMA (kernels_cpu_avx2.cc), picked
// at run time by kernels_cpu.cc. The sketch is the one kernel of the compression pass that is
// bound by arithmetic rather than memory once the difference is streamed into it.
//
// Its results may differ from the portable build's in the last bits (fused multiply-adds, another
// grouping of the partial sums). That is harmless: a rank's sketch only ever enters the summed
// sketch, which every rank receives identically from the All-Reduce, and one machine always takes
// the same build.
#pragma once

#include <cstdint>

namespace arcreduce {
namespace kernels {
namespace avx2 {

// True when this build has the AVX2 sketch and the CPU runs it.
bool available();
void sketch_transposed(const float* y, int64_t n, int64_t m, const float* vt, int r, float* p);

}  // namespace avx2
}  // namespace kernels
}  // namespace arcreduce
