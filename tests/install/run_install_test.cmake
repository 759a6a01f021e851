# Installs the build tree into a fresh prefix, builds tests/install/consumer against it with
# find_package(arcreduce CONFIG), and runs the consumer on 2 ranks through the installed arcrun.
# Inputs (-D): BUILD_DIR, SOURCE_DIR (the consumer), WORK_DIR (wiped first), CONFIG (build type).
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "run_install_test: ${var} is not set")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(JOIN " " line ${ARGV})
    message(FATAL_ERROR "run_install_test: failed (${rc}): ${line}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
set(config_args)
if(CONFIG)
  set(config_args --config ${CONFIG})
endif()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_args})

foreach(file include/arcreduce/arcreduce.h bin/arcrun)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "run_install_test: ${file} was not installed")
  endif()
endforeach()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/consumer -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run(${prefix}/bin/arcrun -np 2 -- ${WORK_DIR}/consumer/consumer)
message(STATUS "run_install_test: installed arcreduce builds, links and reduces on 2 ranks")
