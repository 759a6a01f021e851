# Multi-process tests of the compressors under mpirun (2, 3, 4 ranks): through the public API,
# outputs identical on all ranks, ratio 1 equal to the dense mean, ARC-Top-K's kept rows equal
# to the exact mean, save_state/load_state resuming bit for bit. Included by
# tests/mpi/CMakeLists.txt; uses arcreduce_add_mpi_test() from tests/CMakeLists.txt.
# Labels: mpi, compressors.
set(_cp_dir ${CMAKE_CURRENT_SOURCE_DIR})
# Turns a hang into a stall abort with a message, well before the program's own watchdog (50 s)
# and CTest's timeout.
# Short Ok-Topk periods, so a few steps cover exact and adjusted thresholds and repartitions.
# PowerSGD at rank 2: [16, 12] takes the low-rank path, the [4, 2, 3, 3] view (4 x 18) the dense
# one.
set(_cp_env ARCREDUCE_CHECK_CONSISTENCY=1 ARCREDUCE_STALL_CHECK_SECONDS=5
    ARCREDUCE_STALL_SHUTDOWN_SECONDS=40 ARCREDUCE_OKTOPK_TAU=2 ARCREDUCE_OKTOPK_TAU_PRIME=3
    ARCREDUCE_POWERSGD_RANK=2)

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

# PowerSGD directly over MpiCommunicator: against the naive double-precision reference on every
# step (outputs and each rank's error), identical outputs on every rank, conservation; rank 1
# and rank 3 (where the convolution's view goes dense).
add_executable(powersgd_mpi_test ${_cp_dir}/powersgd_mpi.cc)
target_link_libraries(powersgd_mpi_test PRIVATE arcreduce_internal)
foreach(_np 2 3 4)
  foreach(_rank 1 3)
    set(_name compressors_powersgd_np${_np}_rank${_rank})
    arcreduce_add_mpi_test(NAME ${_name} NP ${_np} COMMAND powersgd_mpi_test ${_rank} TIMEOUT 90)
    set_property(TEST ${_name} APPEND PROPERTY LABELS compressors)
  endforeach()
endforeach()
