# Tests of the numbered examples from 02 on (01's smoke tests are in tests/CMakeLists.txt).
# Included by tests/CMakeLists.txt after arcreduce_add_mpi_test() is defined. Label: example.

# --- 02_robust_shifted_objective: 10 real ranks, as the spec runs it ---
# Settings whose noise-free trajectory --check verifies (distance 0.221476154 after 100 steps,
# < 1e-10 after 1000), one test each: example_02_robust_shifted_objective_check_<setting>.
set(ARCREDUCE_RSO_CHECK_SETTINGS "none;arctopk-exact;arctopk-sketch"
    CACHE STRING "Settings of example 02 that its deterministic check tests (; separated)")
if(TARGET robust_shifted_objective)
  foreach(_setting IN LISTS ARCREDUCE_RSO_CHECK_SETTINGS)
    set(_name example_02_robust_shifted_objective_check_${_setting})
    arcreduce_add_mpi_test(NAME ${_name} NP 10
      COMMAND robust_shifted_objective --check --compressors ${_setting} TIMEOUT 180)
    set_property(TEST ${_name} APPEND PROPERTY LABELS example)
  endforeach()
  # Every setting with noise for a few steps: runs complete, rank 0 writes the table and CSV.
  set(_name example_02_robust_shifted_objective_smoke_np10)
  arcreduce_add_mpi_test(NAME ${_name} NP 10
    COMMAND robust_shifted_objective --steps 30 --seeds 1
            --csv ${CMAKE_CURRENT_BINARY_DIR}/robust_shifted_objective_smoke.csv TIMEOUT 180)
  set_property(TEST ${_name} APPEND PROPERTY LABELS example)
endif()

# --- 03_fashion_mnist: small subsets of the real data set, 2-3 ranks, seconds each ---
set(ARCREDUCE_FASHION_MNIST_DIR /usr/share/datasets/fashion-mnist
    CACHE PATH "Fashion-MNIST IDX files for example 03's tests (Debian: dataset-fashion-mnist)")
if(TARGET train_fashion_mnist)
  set(_fmnist_dir ${ARCREDUCE_FASHION_MNIST_DIR})
  set(_fmnist_tests)
  # A normal run: training, evaluation, overlap measurement, CSV; exit 0 = ranks agree.
  set(_name example_03_fashion_mnist_smoke_np2)
  arcreduce_add_mpi_test(NAME ${_name} NP 2
    COMMAND train_fashion_mnist --data-dir ${_fmnist_dir} --train-samples 512 --test-samples 256
            --epochs 2 --batch-size 32 --overlap-steps 2
            --csv ${CMAKE_CURRENT_BINARY_DIR}/fashion_mnist_smoke.csv TIMEOUT 120)
  list(APPEND _fmnist_tests ${_name})
  # --compare: every compressor trains; one the build lacks is reported as skipped.
  set(_name example_03_fashion_mnist_compare_np2)
  arcreduce_add_mpi_test(NAME ${_name} NP 2
    COMMAND train_fashion_mnist --data-dir ${_fmnist_dir} --train-samples 256 --test-samples 128
            --epochs 1 --batch-size 32 --overlap-steps 0 --compare TIMEOUT 180)
  set_property(TEST ${_name} PROPERTY PASS_REGULAR_EXPRESSION "compressors at ratio")
  list(APPEND _fmnist_tests ${_name})
  # Checkpoint + resume continues bit for bit (3 ranks: an odd world size).
  set(_name example_03_fashion_mnist_resume_np3)
  string(REPLACE ";" "|" _mpirun "${ARCREDUCE_MPIRUN}")
  add_test(NAME ${_name}
    COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${_mpirun}" -DNP=3
            -DEXE=$<TARGET_FILE:train_fashion_mnist> -DDATA_DIR=${_fmnist_dir}
            -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/fashion_mnist_resume
            -P ${CMAKE_CURRENT_SOURCE_DIR}/examples/fashion_mnist_resume.cmake)
  # Without fusion: buckets (so summation orders) would depend on timing (see the script).
  set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS mpi PROCESSORS 3
    ENVIRONMENT "${ARCREDUCE_MPI_TEST_ENV};ARCREDUCE_FUSION_THRESHOLD=0;ARCREDUCE_AUTO_COMPRESS=0")
  list(APPEND _fmnist_tests ${_name})
  # --step-bench (bench/e2e): its JSON line's durations, waits and medians (3 ranks: the
  # longest rank of each step is found among an odd number).
  set(_name example_03_fashion_mnist_step_bench_np3)
  add_test(NAME ${_name}
    COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${_mpirun}" -DNP=3
            -DEXE=$<TARGET_FILE:train_fashion_mnist> -DDATA_DIR=${_fmnist_dir}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/examples/fashion_mnist_step_bench.cmake)
  set_tests_properties(${_name} PROPERTIES TIMEOUT 120 LABELS mpi PROCESSORS 3
    ENVIRONMENT "${ARCREDUCE_MPI_TEST_ENV}")
  list(APPEND _fmnist_tests ${_name})
  if(NOT EXISTS ${_fmnist_dir}/train-images-idx3-ubyte.gz
     AND NOT EXISTS ${_fmnist_dir}/train-images-idx3-ubyte)
    message(STATUS "Fashion-MNIST not found in ${_fmnist_dir}: example 03's training tests "
                   "are disabled (apt-get install dataset-fashion-mnist)")
    set_tests_properties(${_fmnist_tests} PROPERTIES DISABLED TRUE)
  endif()

  # Missing and malformed files end the job with a message naming the file and the problem.
  set(_bad ${CMAKE_CURRENT_BINARY_DIR}/fashion_mnist_bad)
  file(WRITE ${_bad}/bad_magic/train-images-idx3-ubyte "this is not an IDX file")
  # A valid header announcing 60000 28x28 images, then 4 bytes of data (CMake strings cannot
  # hold NUL bytes: printf writes the file).
  file(MAKE_DIRECTORY ${_bad}/truncated)
  string(CONCAT _bytes "\\000\\000\\010\\003" "\\000\\000\\352\\140" "\\000\\000\\000\\034"
         "\\000\\000\\000\\034" "\\001\\002\\003\\004")
  execute_process(COMMAND printf "${_bytes}" OUTPUT_FILE ${_bad}/truncated/train-images-idx3-ubyte)
  set(_fmnist_bad_cases
      "missing|${_bad}/missing|train-images-idx3-ubyte\\[.gz\\] not found in"
      "bad_magic|${_bad}/bad_magic|not an IDX file of unsigned bytes with 3 dimension"
      "truncated|${_bad}/truncated|the file is truncated")
  foreach(_case IN LISTS _fmnist_bad_cases)
    string(REPLACE "|" ";" _case "${_case}")
    list(GET _case 0 _what)
    list(GET _case 1 _dir)
    list(GET _case 2 _regex)
    set(_name example_03_fashion_mnist_data_${_what})
    arcreduce_add_mpi_test(NAME ${_name} NP 1 COMMAND train_fashion_mnist --data-dir ${_dir}
                           TIMEOUT 60)
    set_property(TEST ${_name} PROPERTY PASS_REGULAR_EXPRESSION "${_regex}")
    set_property(TEST ${_name} APPEND PROPERTY LABELS example)
  endforeach()
  set_property(TEST ${_fmnist_tests} APPEND PROPERTY LABELS example)
endif()
