# Installs the build tree into a fresh prefix, builds tests/install/consumer against it with
# find_package(arcreduce CONFIG), and runs the consumer on 2 ranks through the installed arcrun.
# With the PyTorch binding built, it also imports the installed arcreduce.torch and averages a
# tensor with it on 2 ranks.
# Inputs (-D): BUILD_DIR, SOURCE_DIR (the consumer), WORK_DIR (wiped first), CONFIG (build type);
# TORCH_PYTHON and PYTHON_DIR (the package's folder under the prefix) when the binding is built.
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

if(TORCH_PYTHON)
  file(GLOB _extension ${prefix}/${PYTHON_DIR}/arcreduce/torch/_C*.so)
  if(NOT EXISTS ${prefix}/${PYTHON_DIR}/arcreduce/torch/__init__.py OR NOT _extension)
    message(FATAL_ERROR "run_install_test: arcreduce.torch was not installed in ${PYTHON_DIR}")
  endif()
  set(_script [=[
import torch, arcreduce.torch as arc
arc.init()
t = torch.full((3,), float(arc.rank()))
arc.allreduce_(t, "installed", compression="none")
assert torch.equal(t, torch.full((3,), (arc.size() - 1) / 2)), t
print("installed arcreduce.torch: rank", arc.rank(), "ok")
]=])
  run(${CMAKE_COMMAND} -E env PYTHONPATH=${prefix}/${PYTHON_DIR} PYTHONDONTWRITEBYTECODE=1
      ${prefix}/bin/arcrun -np 2 -- ${TORCH_PYTHON} -c "${_script}")
  message(STATUS "run_install_test: installed arcreduce.torch reduces on 2 ranks")
endif()
