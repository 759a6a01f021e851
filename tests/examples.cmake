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
