# The runtime's CUDA device path (docs/cuda.md), only with ARCREDUCE_CUDA:
#   arcreduce_cuda  OBJECT library: ops/cuda (RAII handles, checks, batched-copy kernel, device
#                   query) and runtime/cuda (the device executor); part of libarcreduce, which
#                   then links the CUDA runtime. The CPU build compiles none of it.
#   ARCREDUCE_NCCL  option, ON by default where nccl.h and libnccl are found (under the CUDA
#                   toolkit's directories, NCCL_ROOT or the standard paths): the NCCL
#                   communicator (ops/cuda/nccl_communicator.cc) links libnccl; OFF compiles
#                   its stub, whose create() throws. Always OFF without ARCREDUCE_CUDA.
# Included from the top-level CMakeLists.txt after cmake/kernels.cmake and before
# build_config.h is written (it carries ARCREDUCE_NCCL).
if(NOT ARCREDUCE_CUDA)
  set(ARCREDUCE_NCCL OFF)
  return()
endif()
find_package(CUDAToolkit REQUIRED)

set(_nccl_hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_TARGET_DIR}
                $ENV{NCCL_ROOT} ${NCCL_ROOT})
find_path(ARCREDUCE_NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(ARCREDUCE_NCCL_LIBRARY nccl HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)
if(ARCREDUCE_NCCL_INCLUDE_DIR AND ARCREDUCE_NCCL_LIBRARY)
  set(_arcreduce_nccl_default ON)
else()
  set(_arcreduce_nccl_default OFF)
endif()
option(ARCREDUCE_NCCL "Reduce CUDA device buffers with NCCL (needs nccl.h and libnccl)"
       ${_arcreduce_nccl_default})
if(ARCREDUCE_NCCL AND NOT (ARCREDUCE_NCCL_INCLUDE_DIR AND ARCREDUCE_NCCL_LIBRARY))
  message(FATAL_ERROR "ARCREDUCE_NCCL=ON but NCCL was not found (nccl.h: "
                      "${ARCREDUCE_NCCL_INCLUDE_DIR}, libnccl: ${ARCREDUCE_NCCL_LIBRARY}); "
                      "set NCCL_ROOT or -DARCREDUCE_NCCL=OFF")
endif()
if(ARCREDUCE_NCCL)
  message(STATUS "arcreduce NCCL: ${ARCREDUCE_NCCL_LIBRARY} (${ARCREDUCE_NCCL_INCLUDE_DIR})")
elseif(_arcreduce_nccl_default)
  message(STATUS "arcreduce NCCL: off (-DARCREDUCE_NCCL=OFF); device buffers go through MPI")
else()
  message(STATUS "arcreduce NCCL: nccl.h or libnccl not found; device buffers go through MPI")
endif()
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
if(ARCREDUCE_NCCL)
  # Only nccl_communicator.cc includes nccl.h; libarcreduce links libnccl (CMakeLists.txt).
  target_include_directories(arcreduce_cuda PRIVATE ${ARCREDUCE_NCCL_INCLUDE_DIR})
  target_link_libraries(arcreduce_cuda PUBLIC ${ARCREDUCE_NCCL_LIBRARY})
endif()
