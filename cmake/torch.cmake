# The PyTorch binding (bindings/torch): ON where ARCREDUCE_TORCH_PYTHON can import torch.
# Probes that interpreter once per configure and exports what the extension build needs:
#   ARCREDUCE_TORCH_DIR (torch's package folder), ARCREDUCE_TORCH_CXX11_ABI (0/1),
#   ARCREDUCE_TORCH_PYTHON_INCLUDE, ARCREDUCE_TORCH_EXT_SUFFIX, ARCREDUCE_TORCH_PYTHON_VERSION.
set(ARCREDUCE_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH
    "Python interpreter whose torch the binding is built against")

set(_probe [=[
import sys, sysconfig, os
import torch
print(os.path.dirname(torch.__file__))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print("%d.%d" % sys.version_info[:2])
print(torch.__version__)
]=])
set(_torch_found OFF)
if(EXISTS ${ARCREDUCE_TORCH_PYTHON})
  execute_process(COMMAND ${ARCREDUCE_TORCH_PYTHON} -c "${_probe}"
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0)
    string(REPLACE "\n" ";" _out "${_out}")
    list(GET _out 0 ARCREDUCE_TORCH_DIR)
    list(GET _out 1 ARCREDUCE_TORCH_CXX11_ABI)
    list(GET _out 2 ARCREDUCE_TORCH_PYTHON_INCLUDE)
    list(GET _out 3 ARCREDUCE_TORCH_EXT_SUFFIX)
    list(GET _out 4 ARCREDUCE_TORCH_PYTHON_VERSION)
    list(GET _out 5 _torch_version)
    if(EXISTS ${ARCREDUCE_TORCH_PYTHON_INCLUDE}/Python.h)
      set(_torch_found ON)
    else()
      set(_why "${ARCREDUCE_TORCH_PYTHON_INCLUDE}/Python.h is missing (python3-dev)")
    endif()
  else()
    set(_why "${ARCREDUCE_TORCH_PYTHON} cannot import torch")
  endif()
else()
  set(_why "${ARCREDUCE_TORCH_PYTHON} does not exist")
endif()

# The probe's choice is made again at every configure, so torch installed after a first configure
# is picked up by the next; a value given with -DARCREDUCE_TORCH= that differs from the probe's is
# the user's and is kept from then on.
if(NOT DEFINED CACHE{ARCREDUCE_TORCH}
   OR (DEFINED CACHE{_ARCREDUCE_TORCH_PROBED}
       AND "${ARCREDUCE_TORCH}" STREQUAL "${_ARCREDUCE_TORCH_PROBED}"))
  set(ARCREDUCE_TORCH ${_torch_found} CACHE BOOL "Build the PyTorch binding (arcreduce.torch)"
      FORCE)
  set(_ARCREDUCE_TORCH_PROBED ${_torch_found} CACHE INTERNAL "the probe's last ARCREDUCE_TORCH")
else()
  unset(_ARCREDUCE_TORCH_PROBED CACHE)
endif()
if(ARCREDUCE_TORCH AND NOT _torch_found)
  message(FATAL_ERROR "ARCREDUCE_TORCH=ON, but ${_why}")
elseif(ARCREDUCE_TORCH)
  message(STATUS "arcreduce.torch: building against torch ${_torch_version} of "
                 "${ARCREDUCE_TORCH_PYTHON} (Python ${ARCREDUCE_TORCH_PYTHON_VERSION})")
elseif(_torch_found)
  message(STATUS "arcreduce.torch: off (ARCREDUCE_TORCH=OFF)")
else()
  message(STATUS "arcreduce.torch: off, ${_why} "
                 "(scripts/install-deps.sh installs python3-torch and python3-dev)")
endif()
