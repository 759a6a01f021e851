# Multi-process tests of the compressors under mpirun (2, 3, 4 ranks): through the public API,
# outputs identical on all ranks, ratio 1 equal to the dense mean, ARC-Top-K's kept rows equal
# to the exact mean, save_state/load_state resuming bit for bit. Included by
# tests/mpi/CMakeLists.txt; uses arcreduce_add_mpi_test() from tests/CMakeLists.txt.
# Labels: mpi, compressors.
set(_cp_dir ${CMAKE_CURRENT_SOURCE_DIR})
# Turns a hang into a stall abort with a message, well before the program's own watchdog (50 s)
# and CTest's timeout.
# Short Ok-Topk periods, so a few steps cover exact and adjusted thresholds and repartitions.
set(_cp_env ARCREDUCE_CHECK_CONSISTENCY=1 ARCREDUCE_STALL_CHECK_SECONDS=5
    ARCREDUCE_STALL_SHUTDOWN_SECONDS=40 ARCREDUCE_OKTOPK_TAU=2 ARCREDUCE_OKTOPK_TAU_PRIME=3)

foreach(_prog invariants state)
  add_executable(compressors_${_prog}_test ${_cp_dir}/compressors_${_prog}.cc)
  target_link_libraries(compressors_${_prog}_test PRIVATE arcreduce_internal)
  foreach(_np 2 3 4)
    set(_name compressors_${_prog}_np${_np})
    arcreduce_add_mpi_test(NAME ${_name} NP ${_np} COMMAND compressors_${_prog}_test
                           TIMEOUT 90)
    set_property(TEST ${_name} APPEND PROPERTY ENVIRONMENT ${_cp_env})
    set_property(TEST ${_name} APPEND PROPERTY LABELS compressors)
  endforeach()
endforeach()

# Ok-Topk directly over MpiCommunicator (real isend/irecv): conservation on every call, identical
# outputs on every rank, rebalancing off and on.
add_executable(oktopk_mpi_test ${_cp_dir}/oktopk_mpi.cc)
target_link_libraries(oktopk_mpi_test PRIVATE arcreduce_internal)
foreach(_np 2 3 4)
  foreach(_rebalance 0 1)
    set(_name compressors_oktopk_np${_np}_rebalance${_rebalance})
    arcreduce_add_mpi_test(NAME ${_name} NP ${_np} COMMAND oktopk_mpi_test ${_rebalance}
                           TIMEOUT 90)
    set_property(TEST ${_name} APPEND PROPERTY LABELS compressors)
  endforeach()
endforeach()
