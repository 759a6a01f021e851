# Tests of the PyTorch binding (bindings/torch) and examples/04, under mpirun with Debian's
# Python (ARCREDUCE_TORCH_PYTHON) and the package assembled in the build tree. Included by
# tests/CMakeLists.txt when ARCREDUCE_TORCH is on. Labels: torch, mpi.
if(NOT ARCREDUCE_TORCH)
  return()
endif()

# No bytecode or pytest cache in the source tree; stall guard: a hang becomes an error.
set(_torch_env ${ARCREDUCE_MPI_TEST_ENV} PYTHONPATH=${ARCREDUCE_PYTHON_BUILD_DIR}
    PYTHONDONTWRITEBYTECODE=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    ARCREDUCE_STALL_CHECK_SECONDS=5 ARCREDUCE_STALL_SHUTDOWN_SECONDS=40)
set(_pytest ${ARCREDUCE_TORCH_PYTHON} -m pytest -q -p no:cacheprovider --color=no
    ${PROJECT_SOURCE_DIR}/bindings/torch/tests)

foreach(_np 2 3)
  set(_name torch_pytest_np${_np})
  add_test(NAME ${_name} COMMAND ${ARCREDUCE_MPIRUN} -np ${_np} ${_pytest})
  set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi" PROCESSORS ${_np}
    ENVIRONMENT "${_torch_env}")
endforeach()

# Example 04: every variant trains a little on 2 ranks through arcrun; compare.py prints the table.
set(_name example_04_pytorch_fashion_mnist_compare_np2)
add_test(NAME ${_name}
  COMMAND ${ARCREDUCE_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/examples/04_pytorch_fashion_mnist/compare.py
          --ranks 2 --epochs 1 --build-dir ${PROJECT_BINARY_DIR} --python ${ARCREDUCE_TORCH_PYTHON}
          -- --train-samples 512 --test-samples 256 --batch-size 32
          --data-dir ${ARCREDUCE_FASHION_MNIST_DIR})
set_tests_properties(${_name} PROPERTIES TIMEOUT 240 LABELS "torch;mpi;example" PROCESSORS 2
  ENVIRONMENT "${_torch_env}"
  PASS_REGULAR_EXPRESSION "\\| ddp-powersgd \\| [0-9.]+%"
  FAIL_REGULAR_EXPRESSION "failed|Traceback")
