# Multi-process tests of the runtime (arcreduce::init/allreduce/shutdown/stats) under mpirun.
# Included by tests/mpi/CMakeLists.txt; uses arcreduce_add_mpi_test() and ARCREDUCE_MPIRUN /
# ARCREDUCE_MPI_TEST_ENV from tests/CMakeLists.txt. Label: mpi, runtime.
set(_rt_dir ${CMAKE_CURRENT_SOURCE_DIR})
set(_rt_expect_job bash ${_rt_dir}/expect_job.sh)
# Turns a hang in a test into a stall abort with a message instead of a CTest timeout.
set(_rt_guard_env ARCREDUCE_STALL_CHECK_SECONDS=5 ARCREDUCE_STALL_SHUTDOWN_SECONDS=40)
# The regex (ERE) a log line or message must match to name rank N: "rank 2", "ranks [0, 2]"...
# Stall checks put it after the tensor name on the same line, so the "[rank N]" prefixes of
# log lines cannot satisfy it.
function(_rt_names_rank out n)
  set(${out} "rank[^0-9]{0,12}([0-9]+[^0-9a-z]{1,3}){0,8}${n}([^0-9]|$)" PARENT_SCOPE)
endfunction()

function(_rt_add_env name)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT ${ARGN})
  set_property(TEST ${name} APPEND PROPERTY LABELS runtime)
endfunction()

# Script-driven test: expect_job.sh [checks...] -- mpirun -np NP target args...
# _rt_add_job_test(NAME n NP np TARGET t [ARGS ...] [CHECKS ...] [ENV ...] [TIMEOUT s])
function(_rt_add_job_test)
  cmake_parse_arguments(J "" "NAME;NP;TARGET;TIMEOUT" "ARGS;CHECKS;ENV" ${ARGN})
  if(NOT J_TIMEOUT)
    set(J_TIMEOUT 90)
  endif()
  add_test(NAME ${J_NAME}
    COMMAND ${_rt_expect_job} ${J_CHECKS} --
            ${ARCREDUCE_MPIRUN} -np ${J_NP} $<TARGET_FILE:${J_TARGET}> ${J_ARGS})
  set_tests_properties(${J_NAME} PROPERTIES TIMEOUT ${J_TIMEOUT} LABELS "mpi;runtime"
    ENVIRONMENT "${ARCREDUCE_MPI_TEST_ENV};${J_ENV}" PROCESSORS ${J_NP})
endfunction()

# --- correctness (allreduce, broadcast), errors, stats: one gtest binary, run under several world sizes/configs ---
add_executable(runtime_mpi_tests
  ${_rt_dir}/runtime_main.cc
  ${_rt_dir}/runtime_allreduce_test.cc
  ${_rt_dir}/runtime_broadcast_test.cc
  ${_rt_dir}/runtime_errors_test.cc
  ${_rt_dir}/runtime_process_set_test.cc
  ${_rt_dir}/runtime_stats_test.cc)
target_link_libraries(runtime_mpi_tests PRIVATE arcreduce_internal GTest::gtest)

# name | np | extra ARCREDUCE_* settings ("-" for none, "," separated)
set(_rt_suite_runs
  "runtime_allreduce_np1|1|-"
  "runtime_allreduce_np2|2|-"
  "runtime_allreduce_np3_nofusion|3|ARCREDUCE_FUSION_THRESHOLD=0"
  "runtime_allreduce_np3_nocache|3|ARCREDUCE_CACHE_CAPACITY=0"
  "runtime_allreduce_np4|4|-"
  "runtime_allreduce_np4_small_buckets_small_cache|4|ARCREDUCE_FUSION_THRESHOLD=4096,ARCREDUCE_CACHE_CAPACITY=4"
  "runtime_allreduce_np2_nofusion_nocache|2|ARCREDUCE_FUSION_THRESHOLD=0,ARCREDUCE_CACHE_CAPACITY=0"
  "runtime_allreduce_np3_ring|3|ARCREDUCE_ALLREDUCE_ALGORITHM=ring"
  "runtime_allreduce_np3_doubling|3|ARCREDUCE_ALLREDUCE_ALGORITHM=doubling"
  "runtime_allreduce_np4_mpi|4|ARCREDUCE_ALLREDUCE_ALGORITHM=mpi")
foreach(_run IN LISTS _rt_suite_runs)
  string(REPLACE "|" ";" _fields "${_run}")
  list(GET _fields 0 _name)
  list(GET _fields 1 _np)
  list(GET _fields 2 _env)
  arcreduce_add_mpi_test(NAME ${_name} NP ${_np} COMMAND runtime_mpi_tests
                         --watchdog_seconds=100 TIMEOUT 150)
  _rt_add_env(${_name} ${_rt_guard_env})
  if(NOT _env STREQUAL "-")
    string(REPLACE "," ";" _env "${_env}")
    _rt_add_env(${_name} ${_env})
  endif()
endforeach()

# The harness: one rank's gtest failure fails mpirun and is reported with that rank.
_rt_add_job_test(NAME runtime_harness_reports_failing_rank NP 2 TARGET runtime_mpi_tests
  ARGS --gtest_filter=DISABLED_HarnessSelfCheck.* --gtest_also_run_disabled_tests
       --watchdog_seconds=30
  CHECKS --exit nonzero --within 60 --expect "\\[rank 1\\] FAILURE" --expect "deliberate failure"
         --reject "\\[rank 0\\] FAILURE")

# --- shutdown with pending ops ---
add_executable(runtime_shutdown_test ${_rt_dir}/runtime_shutdown.cc)
target_link_libraries(runtime_shutdown_test PRIVATE arcreduce_internal)
foreach(_case "all|2" "all|3" "0|3" "1|2" "3|4")
  string(REPLACE "|" ";" _fields "${_case}")
  list(GET _fields 0 _who)
  list(GET _fields 1 _np)
  set(_name runtime_shutdown_by_${_who}_np${_np})
  arcreduce_add_mpi_test(NAME ${_name} NP ${_np} COMMAND runtime_shutdown_test
                         --shutdown-rank=${_who} TIMEOUT 90)
  _rt_add_env(${_name} ${_rt_guard_env})
endforeach()
foreach(_case "1|2" "2|3" "0|4")
  string(REPLACE "|" ";" _fields "${_case}")
  list(GET _fields 0 _who)
  list(GET _fields 1 _np)
  set(_name runtime_shutdown_during_traffic_by_${_who}_np${_np})
  arcreduce_add_mpi_test(NAME ${_name} NP ${_np} COMMAND runtime_shutdown_test
                         --shutdown-rank=${_who} --during-traffic TIMEOUT 90)
  _rt_add_env(${_name} ${_rt_guard_env})
endforeach()

# --- configuration errors: init() throws arcreduce::Error on every rank ---
add_executable(runtime_config_test ${_rt_dir}/runtime_config.cc)
target_link_libraries(runtime_config_test PRIVATE arcreduce_internal)
function(_rt_config_test name np)
  arcreduce_add_mpi_test(NAME runtime_config_${name} NP ${np} COMMAND runtime_config_test ${ARGN}
                         TIMEOUT 60)
  set_property(TEST runtime_config_${name} APPEND PROPERTY LABELS runtime)
endfunction()
_rt_config_test(ratio_too_big_all_ranks 2 --setenv=all:ARCREDUCE_COMPRESS_RATIO=1.5
  --expect-error --expect-text=ARCREDUCE_COMPRESS_RATIO --expect-text=1.5)
_rt_config_test(ratio_not_a_number_np1 1 --setenv=all:ARCREDUCE_COMPRESS_RATIO=abc
  --expect-error --expect-text=ARCREDUCE_COMPRESS_RATIO --expect-text=abc)
_rt_config_test(ratio_zero_all_ranks 3 --setenv=all:ARCREDUCE_COMPRESS_RATIO=0
  --expect-error --expect-text=ARCREDUCE_COMPRESS_RATIO)
_rt_config_test(negative_fusion_threshold 3 --setenv=all:ARCREDUCE_FUSION_THRESHOLD=-1
  --expect-error --expect-text=ARCREDUCE_FUSION_THRESHOLD --expect-text=-1)
_rt_config_test(bad_log_level 2 --setenv=all:ARCREDUCE_LOG_LEVEL=loud
  --expect-error --expect-text=ARCREDUCE_LOG_LEVEL --expect-text=loud --expect-text=warning)
_rt_config_test(bad_compressor 2 --setenv=all:ARCREDUCE_COMPRESSOR=bogus
  --expect-error --expect-text=ARCREDUCE_COMPRESSOR --expect-text=bogus --expect-text=arctopk)
_rt_config_test(unknown_variable 2 --setenv=all:ARCREDUCE_FOO=1
  --expect-error --expect-text=ARCREDUCE_FOO)
_rt_config_test(bad_ratio_on_one_rank 3 --setenv=1:ARCREDUCE_COMPRESS_RATIO=1.5
  --expect-error --expect-text=ARCREDUCE_COMPRESS_RATIO --expect-bad-rank=1)
_rt_config_test(bad_log_level_on_last_rank 4 --setenv=3:ARCREDUCE_LOG_LEVEL=loud
  --expect-error --expect-text=ARCREDUCE_LOG_LEVEL --expect-bad-rank=3)
_rt_config_test(unknown_variable_on_rank0 2 --setenv=0:ARCREDUCE_FOO=1
  --expect-error --expect-text=ARCREDUCE_FOO --expect-bad-rank=0)
_rt_config_test(fusion_threshold_differs 3 --setenv=2:ARCREDUCE_FUSION_THRESHOLD=1024
  --expect-error --expect-text=FUSION_THRESHOLD)
_rt_config_test(cache_capacity_differs 2 --setenv=1:ARCREDUCE_CACHE_CAPACITY=7
  --expect-error --expect-text=CACHE_CAPACITY)
# The cycle time is a per-rank setting (docs/configuration.md): differing values are accepted.
_rt_config_test(cycle_time_may_differ 2 --setenv=0:ARCREDUCE_CYCLE_TIME_MS=5 --expect-ok)
_rt_config_test(programmatic_ratio_invalid 2 --programmatic=compress_ratio=1.5
  --expect-error --expect-text=COMPRESS_RATIO)
_rt_config_test(valid_settings_accepted 2 --setenv=all:ARCREDUCE_LOG_LEVEL=debug
  --setenv=all:ARCREDUCE_COMPRESS_RATIO=1 --setenv=all:ARCREDUCE_FUSION_THRESHOLD=0
  --setenv=all:ARCREDUCE_CACHE_CAPACITY=0 --setenv=all:ARCREDUCE_CYCLE_TIME_MS=0.5
  --setenv=all:ARCREDUCE_COMPRESSOR=none --setenv=all:ARCREDUCE_ERROR_FEEDBACK=none
  --expect-ok)
_rt_config_test(init_again_after_bad_value 2 --setenv=1:ARCREDUCE_FUSION_THRESHOLD=-1
  --expect-error --expect-text=ARCREDUCE_FUSION_THRESHOLD --retry)

# --- stall inspector: warning, then kStalled and a job abort ---
add_executable(runtime_stall_test ${_rt_dir}/runtime_stall.cc)
target_link_libraries(runtime_stall_test PRIVATE arcreduce_internal)
_rt_names_rank(_rank2 2)
_rt_names_rank(_rank1 1)
_rt_names_rank(_rank0 0)
# "...every rank logs the error": a log line with rank K's prefix, "stall" and the tensor name.
set(_logged_by "rank[^0-9]{0,3}%K%[^0-9].*stall.*stalled_tensor")
string(REPLACE "%K%" 0 _logged_by0 "${_logged_by}")
string(REPLACE "%K%" 1 _logged_by1 "${_logged_by}")
string(REPLACE "%K%" 2 _logged_by2 "${_logged_by}")
_rt_add_job_test(NAME runtime_stall_shutdown_np3 NP 3 TARGET runtime_stall_test
  ARGS --missing-rank=2
  ENV ARCREDUCE_STALL_CHECK_SECONDS=1 ARCREDUCE_STALL_SHUTDOWN_SECONDS=3
  CHECKS --exit nonzero --within 60 --expect "stalled_tensor[^_].*${_rank2}"
         --expect "stalled_tensor_b.*${_rank2}" --expect "${_logged_by0}"
         --expect "${_logged_by1}" --expect "${_logged_by2}" --reject "TEST-ERROR")
_rt_add_job_test(NAME runtime_stall_shutdown_root_missing_np2 NP 2 TARGET runtime_stall_test
  ARGS --missing-rank=0
  ENV ARCREDUCE_STALL_CHECK_SECONDS=1 ARCREDUCE_STALL_SHUTDOWN_SECONDS=3
  CHECKS --exit nonzero --within 60 --expect "stalled_tensor.*${_rank0}" --reject "TEST-ERROR")
_rt_add_job_test(NAME runtime_stall_shutdown_cached_np4 NP 4 TARGET runtime_stall_test
  ARGS --missing-rank=1 --warm-steps=5
  ENV ARCREDUCE_STALL_CHECK_SECONDS=1 ARCREDUCE_STALL_SHUTDOWN_SECONDS=3
  CHECKS --exit nonzero --within 60 --expect "warm steps done"
         --expect "stalled_tensor[^_].*${_rank1}" --expect "stalled_tensor_b.*${_rank1}"
         --reject "TEST-ERROR")
_rt_add_job_test(NAME runtime_stall_warning_np2 NP 2 TARGET runtime_stall_test
  ARGS --missing-rank=1 --late-seconds=3
  ENV ARCREDUCE_STALL_CHECK_SECONDS=1 ARCREDUCE_STALL_SHUTDOWN_SECONDS=0
  CHECKS --exit zero --within 60 --expect "warn.*stalled_tensor.*${_rank1}"
         --expect "late ops completed" --reject "TEST-ERROR")

# --- a rank that dies ends the job in bounded time ---
add_executable(runtime_kill_test ${_rt_dir}/runtime_kill.cc)
target_link_libraries(runtime_kill_test PRIVATE arcreduce_internal)
foreach(_np 3 4)
  _rt_add_job_test(NAME runtime_killed_rank_np${_np} NP ${_np} TARGET runtime_kill_test
    ARGS --victim=2
    CHECKS --exit nonzero --within 60 --expect "killing myself" --reject "TEST-ERROR")
endforeach()

# --- one rank's coordinator fails: the job ends on every rank with its message ---
add_executable(runtime_coordinator_failure_test ${_rt_dir}/runtime_coordinator_failure.cc)
target_link_libraries(runtime_coordinator_failure_test PRIVATE arcreduce_internal)
foreach(_case "3|1" "2|0" "4|3")
  string(REPLACE "|" ";" _fields "${_case}")
  list(GET _fields 0 _np)
  list(GET _fields 1 _victim)
  # Within 25 s: the abort's grace is 0.5 s; the stall timeout (40 s here) would be too late.
  _rt_add_job_test(NAME runtime_coordinator_failure_np${_np}_rank${_victim} NP ${_np}
    TARGET runtime_coordinator_failure_test ARGS --victim=${_victim} ENV ${_rt_guard_env}
    CHECKS --exit nonzero --within 25
           --expect "coordinator failed on rank ${_victim}: injected receive-side failure"
           --reject "TEST-ERROR")
endforeach()

# --- logging: spdlog on stderr, one prefix per rank, ARCREDUCE_LOG_LEVEL ---
_rt_add_job_test(NAME runtime_logging_debug_has_rank_prefix_np2 NP 2 TARGET runtime_config_test
  ARGS --setenv=all:ARCREDUCE_LOG_LEVEL=debug --expect-ok
  CHECKS --exit zero --within 60 --expect "rank[^0-9]{0,3}0[^0-9].*debug|debug.*rank[^0-9]{0,3}0[^0-9]"
         --expect "rank[^0-9]{0,3}1[^0-9].*debug|debug.*rank[^0-9]{0,3}1[^0-9]")
_rt_add_job_test(NAME runtime_logging_default_level_is_quiet_np2 NP 2 TARGET runtime_config_test
  ARGS --expect-ok
  CHECKS --exit zero --within 60 --reject "[^a-z](debug|info|trace)[^a-z]")

# --- init() again on one thread while others submit and synchronize ---
add_executable(runtime_reinit_test ${_rt_dir}/runtime_reinit.cc)
target_link_libraries(runtime_reinit_test PRIVATE arcreduce_internal)
foreach(_case "1|150" "2|50")
  string(REPLACE "|" ";" _fields "${_case}")
  list(GET _fields 0 _np)
  list(GET _fields 1 _rounds)
  set(_name runtime_reinit_while_synchronizing_np${_np})
  arcreduce_add_mpi_test(NAME ${_name} NP ${_np} COMMAND runtime_reinit_test
                         --rounds=${_rounds} --watchdog-seconds=100 TIMEOUT 120)
  _rt_add_env(${_name} ${_rt_guard_env})
endforeach()

# --- callbacks call the API during shutdown and re-init; SERIALIZED: one thread in MPI ---
add_executable(runtime_callback_lifecycle_test ${_rt_dir}/runtime_callback_lifecycle.cc)
target_link_libraries(runtime_callback_lifecycle_test PRIVATE arcreduce_internal)
# Its MPI_Comm_dup/MPI_Comm_free wrap Open MPI's for the library too (PMPI interposition).
set_target_properties(runtime_callback_lifecycle_test PROPERTIES ENABLE_EXPORTS ON)
foreach(_case "1|multiple" "2|multiple" "3|serialized")
  string(REPLACE "|" ";" _fields "${_case}")
  list(GET _fields 0 _np)
  list(GET _fields 1 _level)
  set(_args --rounds=20 --watchdog-seconds=60)
  if(_level STREQUAL "serialized")
    list(APPEND _args --serialized)
  endif()
  _rt_add_job_test(NAME runtime_callbacks_during_shutdown_np${_np}_${_level} NP ${_np}
    TARGET runtime_callback_lifecycle_test ARGS ${_args} ENV ${_rt_guard_env} TIMEOUT 120
    CHECKS --exit zero --within 100 --expect "PASS" --reject "TEST-ERROR|FAIL")
endforeach()

# --- what init() gives the MPI library it initialises (runtime/mpi_environment.h) ---
add_executable(runtime_mpi_env_test ${_rt_dir}/runtime_mpi_env.cc)
target_link_libraries(runtime_mpi_env_test PRIVATE arcreduce_internal)
# Default: Open MPI's TCP eager limit raised to kTcpEagerLimitBytes; the ring (forced, so that
# one host runs it) still sums exactly.
arcreduce_add_mpi_test(NAME runtime_tcp_eager_limit_default_np3 NP 3
                       COMMAND runtime_mpi_env_test TIMEOUT 60)
_rt_add_env(runtime_tcp_eager_limit_default_np3 ${_rt_guard_env}
            ARCREDUCE_ALLREDUCE_ALGORITHM=ring)
# A value the user set is kept.
arcreduce_add_mpi_test(NAME runtime_tcp_eager_limit_user_value_np2 NP 2
                       COMMAND runtime_mpi_env_test --expect=70000 TIMEOUT 60)
_rt_add_env(runtime_tcp_eager_limit_user_value_np2 ${_rt_guard_env}
            OMPI_MCA_btl_tcp_eager_limit=70000)
