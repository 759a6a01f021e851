# Compression kernels (compressors/kernels): one Thrust source, two builds.
#   arcreduce_kernels       OBJECT library, g++ with Thrust's CPP system; part of libarcreduce.
#   arcreduce_cuda_kernels  OBJECT library, nvcc, only with ARCREDUCE_CUDA; part of libarcreduce
#                           (the CUDA device path compresses with it).
# Included from the top-level CMakeLists.txt after _arcreduce_internal_includes is set.

# Thrust/CUB headers: CUDA's CCCL first, then Debian's libthrust-dev.
set(ARCREDUCE_THRUST_INCLUDE_DIR "" CACHE PATH "Directory holding thrust/ (empty: search)")
if(NOT ARCREDUCE_THRUST_INCLUDE_DIR)
  set(_thrust_hints /usr/local/cuda/include/cccl)
  if(CMAKE_CUDA_COMPILER)
    get_filename_component(_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    list(PREPEND _thrust_hints "${_nvcc_dir}/../include/cccl")
  endif()
  find_path(_arcreduce_thrust_dir thrust/version.h
    HINTS ${_thrust_hints} /usr/include NO_DEFAULT_PATH)
  if(NOT _arcreduce_thrust_dir)
    message(FATAL_ERROR "arcreduce kernels need Thrust headers: install the CUDA toolkit (CCCL, "
                        "/usr/local/cuda/include/cccl) or Debian's libthrust-dev, or set "
                        "ARCREDUCE_THRUST_INCLUDE_DIR")
  endif()
  set(ARCREDUCE_THRUST_INCLUDE_DIR "${_arcreduce_thrust_dir}" CACHE PATH
      "Directory holding thrust/ (empty: search)" FORCE)
endif()
message(STATUS "arcreduce kernels: Thrust from ${ARCREDUCE_THRUST_INCLUDE_DIR}")

set(_kernels_dir ${CMAKE_CURRENT_SOURCE_DIR}/compressors/kernels)
add_library(arcreduce_kernels OBJECT ${_kernels_dir}/kernels_cpu.cc ${_kernels_dir}/random_host.cc)
set_target_properties(arcreduce_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(arcreduce_kernels PUBLIC ${_arcreduce_internal_includes})
target_include_directories(arcreduce_kernels SYSTEM PRIVATE ${ARCREDUCE_THRUST_INCLUDE_DIR})
target_compile_definitions(arcreduce_kernels
  PRIVATE THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP THRUST_HOST_SYSTEM=THRUST_HOST_SYSTEM_CPP)
# GCC's -O2 vectorises only loops whose trip count is a known multiple of the vector width;
# the kernels are bandwidth bound and need the vectoriser's full cost model.
target_compile_options(arcreduce_kernels PRIVATE
  $<$<AND:$<CXX_COMPILER_ID:GNU>,$<NOT:$<CONFIG:Debug>>>:-O3>)
# The portable CPU build must compute the Gaussian projection with exactly the IEEE operations
# of portable_math.h, as the CUDA build does: no contraction of a * b + c into FMA. x86-64
# without -mfma has no FMA to contract into; -ffp-contract=off keeps it so where the base ISA
# has one (aarch64). Not for kernels_cpu_avx2.cc, whose sketch is meant to use FMA.
if(CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
  set_source_files_properties(${_kernels_dir}/kernels_cpu.cc ${_kernels_dir}/random_host.cc
    PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
endif()
# x86-64: a second build of the sketch with AVX2 and FMA, chosen at run time when the CPU has
# them (kernels_cpu_avx2.h says why only the sketch).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND
   CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
  target_sources(arcreduce_kernels PRIVATE ${_kernels_dir}/kernels_cpu_avx2.cc)
  set_source_files_properties(${_kernels_dir}/kernels_cpu_avx2.cc PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma")
  target_compile_definitions(arcreduce_kernels PRIVATE ARC_KERNELS_AVX2=1)
endif()

# UBSan: Thrust's CPU sort binds a reference to a null pointer of an empty tag type when it
# assigns through thrust/detail/reference.h (reported in select_system.inl; upstream CCCL), in
# every test that reaches it. Its null check is
# made recoverable in the two sources that instantiate the sort, so that the one entry of
# tests/sanitizers/ubsan.supp (that header, check "null") can suppress it: suppressions only apply
# to recoverable checks. Any other report still ends the process (UBSAN_OPTIONS=halt_on_error=1,
# scripts/sanitize.sh).
if(ARCREDUCE_SANITIZE MATCHES "undefined")
  set_property(SOURCE ${_kernels_dir}/kernels_cpu.cc ${_kernels_dir}/kernels_cpu_avx2.cc APPEND
               PROPERTY COMPILE_OPTIONS -fsanitize-recover=null)
endif()

if(ARCREDUCE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  # Ampere and Hopper by default; two architectures keep nvcc's time modest.
  set(ARCREDUCE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures of the kernels")
  add_library(arcreduce_cuda_kernels OBJECT ${_kernels_dir}/kernels_cuda.cu)
  set_target_properties(arcreduce_cuda_kernels PROPERTIES
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_ARCHITECTURES "${ARCREDUCE_CUDA_ARCHITECTURES}"
    POSITION_INDEPENDENT_CODE ON)
  # The directory's g++ warning flags (-Wall ...) are not nvcc options: hand them to the host
  # compiler instead.
  get_target_property(_host_flags arcreduce_cuda_kernels COMPILE_OPTIONS)
  if(_host_flags)
    string(JOIN "," _host_flags_joined ${_host_flags})
    set_target_properties(arcreduce_cuda_kernels PROPERTIES COMPILE_OPTIONS
      "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_host_flags_joined}>")
  endif()
  target_include_directories(arcreduce_cuda_kernels PUBLIC ${_arcreduce_internal_includes})
  target_link_libraries(arcreduce_cuda_kernels PUBLIC CUDA::cudart)
endif()
