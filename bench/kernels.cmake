# kernel_bench: Google Benchmark throughput of the CPU kernels (not a test). Included from
# bench/CMakeLists.txt; skipped when Google Benchmark (libbenchmark-dev) is missing.
find_package(benchmark CONFIG QUIET)
if(benchmark_FOUND AND TARGET arcreduce_kernels)
  add_executable(kernel_bench ${CMAKE_CURRENT_LIST_DIR}/kernel_bench.cc)
  target_link_libraries(kernel_bench PRIVATE arcreduce_kernels benchmark::benchmark)
else()
  message(STATUS "kernel_bench skipped: Google Benchmark not found")
endif()
