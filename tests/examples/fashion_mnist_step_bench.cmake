# Checks the JSON line of examples/03_fashion_mnist's --step-bench (bench/e2e reads it): one
# duration and one wait per timed step, every wait within its step (the wait is part of it), the
# medians those of the lists, no wait without communication, and the runtime's counters present
# only when it communicates.
# cmake -DMPIRUN=<mpirun|args, | separated> -DNP=n -DEXE=path -DDATA_DIR=dir -P ...
string(REPLACE "|" ";" mpirun "${MPIRUN}")
set(steps 5)
set(common --data-dir ${DATA_DIR} --train-samples 1024 --test-samples 1 --step-bench ${steps}
           --step-bench-warmup 2 --step-bench-budget 0)

# A decimal number of seconds in microseconds, rounded (CMake's arithmetic is integer only).
# string(JSON) returns numbers with 17 significant digits ("0.053636999999999997" for 0.053637)
# or in exponent form ("9.9999999999999995e-07").
function(to_us seconds out_var)
  if(seconds MATCHES "^([0-9]+)(\\.([0-9]*))?$")
    set(whole "${CMAKE_MATCH_1}")
    string(SUBSTRING "${CMAKE_MATCH_3}0000000" 0 7 tenths)  # units of 0.1 us
    # The leading 1 keeps math() from reading zeros first; (x + 5) / 10 rounds.
    math(EXPR us "${whole} * 1000000 + (1${tenths} - 10000000 + 5) / 10")
  elseif(seconds MATCHES "^[0-9.]+e-")
    set(us 0)  # the program prints %.6f, so this is 0 or a rounding of 1e-06 at most
  else()
    message(FATAL_ERROR "not a number of seconds: '${seconds}'")
  endif()
  set(${out_var} ${us} PARENT_SCOPE)
endfunction()

# A JSON array of seconds as a CMake list of microseconds.
function(json_us json key out_var)
  string(JSON n LENGTH "${json}" ${key})
  set(values)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON v GET "${json}" ${key} ${i})
    to_us(${v} us)
    list(APPEND values ${us})
  endforeach()
  set(${out_var} "${values}" PARENT_SCOPE)
endfunction()

foreach(variant floor arctopk)
  set(args ${common})
  if(variant STREQUAL "floor")
    list(APPEND args --no-communication)
  else()
    list(APPEND args --compressor arctopk --compress-ratio 0.05)
  endif()
  execute_process(COMMAND ${mpirun} -np ${NP} ${EXE} ${args}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  string(REGEX MATCH "{\"bench\": \"e2e\"[^\n]*" json "${out}")
  if(NOT rc EQUAL 0 OR json STREQUAL "")
    message(FATAL_ERROR "--step-bench ${variant} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  string(JSON got_steps GET "${json}" steps)
  string(JSON median GET "${json}" median_s)
  string(JSON median_wait GET "${json}" median_wait_s)
  to_us(${median} median)
  to_us(${median_wait} median_wait)
  string(JSON cpu TYPE "${json}" coordinator_cpu_s_per_step)
  json_us("${json}" step_s durations)
  json_us("${json}" wait_s waits)
  list(LENGTH durations n_durations)
  list(LENGTH waits n_waits)
  if(NOT got_steps EQUAL steps OR NOT n_durations EQUAL steps OR NOT n_waits EQUAL steps)
    message(FATAL_ERROR "${variant}: ${got_steps} steps, ${n_durations} durations, "
                        "${n_waits} waits; expected ${steps} of each:\n${json}")
  endif()
  foreach(i RANGE 4)
    list(GET durations ${i} d)
    list(GET waits ${i} w)
    if(w GREATER d OR d LESS_EQUAL 0 OR w LESS 0)
      message(FATAL_ERROR "${variant}: step ${i} lasted ${d} us and waited ${w} us:\n${json}")
    endif()
    if(variant STREQUAL "floor" AND NOT w EQUAL 0)
      message(FATAL_ERROR "floor: step ${i} waited ${w} us without communicating:\n${json}")
    endif()
  endforeach()
  # Five values: the median is the third smallest.
  list(SORT durations COMPARE NATURAL)
  list(SORT waits COMPARE NATURAL)
  list(GET durations 2 expected_median)
  list(GET waits 2 expected_wait)
  if(NOT median EQUAL expected_median OR NOT median_wait EQUAL expected_wait)
    message(FATAL_ERROR "${variant}: medians ${median} / ${median_wait} us, expected "
                        "${expected_median} / ${expected_wait}:\n${json}")
  endif()
  if(variant STREQUAL "floor" AND NOT cpu STREQUAL "NULL")
    message(FATAL_ERROR "floor: a coordinator CPU time is reported (${cpu}):\n${json}")
  endif()
  if(variant STREQUAL "arctopk" AND NOT cpu STREQUAL "NUMBER")
    message(FATAL_ERROR "arctopk: no coordinator CPU time (${cpu}):\n${json}")
  endif()
  message(STATUS "${variant}: median ${median} us, wait ${median_wait} us")
endforeach()
