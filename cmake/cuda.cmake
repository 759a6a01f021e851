# The runtime's CUDA device path (docs/cuda.md), only with ARCREDUCE_CUDA:
#   arcreduce_cuda  OBJECT library: ops/cuda (RAII handles, checks, batched-copy kernel, device
#                   query) and runtime/cuda (the device executor); part of libarcreduce, which
#                   then links the CUDA runtime. The CPU build compiles none of it.
# Included from the top-level CMakeLists.txt after cmake/kernels.cmake.
if(NOT ARCREDUCE_CUDA)
  return()
endif()
find_package(CUDAToolkit REQUIRED)
file(GLOB _arcreduce_cuda_srcs CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/ops/cuda/*.cc ${CMAKE_CURRENT_SOURCE_DIR}/ops/cuda/*.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/runtime/cuda/*.cc)
add_library(arcreduce_cuda OBJECT ${_arcreduce_cuda_srcs})
set_target_properties(arcreduce_cuda PROPERTIES
  CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_ARCHITECTURES "${ARCREDUCE_CUDA_ARCHITECTURES}"
  POSITION_INDEPENDENT_CODE ON)
# The directory's g++ warning flags go to nvcc's host compiler (as in cmake/kernels.cmake).
get_target_property(_cuda_host_flags arcreduce_cuda COMPILE_OPTIONS)
if(_cuda_host_flags)
  string(JOIN "," _cuda_host_flags_joined ${_cuda_host_flags})
  set_target_properties(arcreduce_cuda PROPERTIES COMPILE_OPTIONS
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_cuda_host_flags_joined}>;$<$<COMPILE_LANGUAGE:CXX>:${_cuda_host_flags}>")
endif()
target_include_directories(arcreduce_cuda PUBLIC ${_arcreduce_internal_includes})
target_link_libraries(arcreduce_cuda PUBLIC CUDA::cudart MPI::MPI_C spdlog::spdlog
                                            Threads::Threads)
