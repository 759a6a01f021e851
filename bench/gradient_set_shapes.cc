// Prints a gradient set (bench/gradient_sets.h) one tensor a line, "name dim0 dim1 ...", in
// backward order, so that benchmarks outside C++ (bench/ddp/ddp_bench.py) reduce exactly the
// same shapes as compressor_bench.
//
//   gradient_set_shapes [SET]     (default tiny-transformer-24M)
#include <cstdio>
#include <exception>
#include <string>

#include "bench/gradient_sets.h"

int main(int argc, char** argv) {
  try {
    const auto set =
        arcreduce::bench::gradient_set(argc > 1 ? argv[1] : std::string("tiny-transformer-24M"));
    for (const auto& t : set.tensors) {
      std::printf("%s", t.name.c_str());
      for (int64_t d : t.shape) std::printf(" %lld", static_cast<long long>(d));
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradient_set_shapes: %s\n", e.what());
    return 2;
  }
  return 0;
}
