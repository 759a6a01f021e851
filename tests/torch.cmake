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

foreach(_np 1 2 3 4)
  set(_name torch_pytest_np${_np})
  add_test(NAME ${_name} COMMAND ${ARCREDUCE_MPIRUN} -np ${_np} ${_pytest})
  # The 3-rank session runs efm without momentum-factor masking, so that efm at ratio 1 is
  # checked against heavy-ball SGD (test_efm_takes_over_sgd_momentum_and_matches_heavy_ball).
  set(_env ${_torch_env})
  if(_np EQUAL 3)
    list(APPEND _env ARCREDUCE_EF_MASKING=0)
  endif()
  set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi" PROCESSORS ${_np}
    ENVIRONMENT "${_env}")
endforeach()

# bench/tta/make_report.py's tables (no MPI; pytest comes with the binding's test set-up).
add_test(NAME bench_tta_make_report
  COMMAND ${ARCREDUCE_TORCH_PYTHON} -m pytest -q -p no:cacheprovider --color=no
          ${PROJECT_SOURCE_DIR}/tests/bench)
set_tests_properties(bench_tta_make_report PROPERTIES TIMEOUT 60 LABELS "torch"
  ENVIRONMENT "PYTHONPATH=${PROJECT_SOURCE_DIR}/bench/tta;PYTHONDONTWRITEBYTECODE=1")

# examples/04's gloo rendezvous (also used by bench/ddp and bench/e2e): address, errors, timeout.
add_test(NAME example_04_rendezvous
  COMMAND ${ARCREDUCE_TORCH_PYTHON} -m pytest -q -p no:cacheprovider --color=no
          ${PROJECT_SOURCE_DIR}/tests/examples/test_rendezvous.py)
set_tests_properties(example_04_rendezvous PROPERTIES TIMEOUT 120 LABELS "torch;example"
  ENVIRONMENT "PYTHONPATH=${PROJECT_SOURCE_DIR}/examples/04_pytorch_fashion_mnist;PYTHONDONTWRITEBYTECODE=1")

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

# Example 05: a tiny transformer trains a few steps on 2 ranks with every exchange, and rank 0
# prints its curve (the corpus comes from Debian's fortunes package, see install-deps.sh).
foreach(_variant dense arctopk topk randk oktopk powersgd ddp ddp-powersgd ddp-hook floor)
  set(_name example_05_char_transformer_${_variant}_np2)
  add_test(NAME ${_name}
    COMMAND ${PROJECT_BINARY_DIR}/launcher/arcrun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29531
            -- ${ARCREDUCE_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/examples/05_char_transformer/train.py
            --variant ${_variant} --steps 6 --eval-every 3 --eval-batches 1 --batch-size 2
            --context 16 --width 32 --layers 1 --heads 2 --json)
  set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi;example" PROCESSORS 2
    ENVIRONMENT "${_torch_env}" RESOURCE_LOCK example_05_port
    PASS_REGULAR_EXPRESSION "\"bench\": \"lm\".*\"step\": 6"
    FAIL_REGULAR_EXPRESSION "Traceback")
endforeach()

# Example 05's --target-loss (the time-to-accuracy benchmark's transformer): a loss not reached
# runs every step; a loss already met stops before the first. Both end with the JSON line
# bench/tta/make_report.py reads, DDP's with its estimated bytes. ARC-Top-K under AdamW gets
# the binding's adaptive-optimizer defaults (ratio 0.5, no error feedback; docs/pytorch.md).
foreach(_case "arctopk|0|4|false|0.5" "ddp|0|4|true|null" "dense|100|0|false|null")
  string(REPLACE "|" ";" _fields "${_case}")
  list(GET _fields 0 _variant)
  list(GET _fields 1 _target)
  list(GET _fields 2 _last)
  list(GET _fields 3 _estimated)
  list(GET _fields 4 _ratio)
  set(_name example_05_tta_${_variant}_target${_target}_np2)
  add_test(NAME ${_name}
    COMMAND ${PROJECT_BINARY_DIR}/launcher/arcrun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29531
            -- ${ARCREDUCE_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/examples/05_char_transformer/train.py
            --variant ${_variant} --steps 4 --eval-every 2 --eval-batches 1 --batch-size 2
            --context 16 --width 32 --layers 1 --heads 2 --json --target-loss ${_target})
  if(_target EQUAL 0)
    set(_pass "\"ratio_used\": ${_ratio}, \"error_feedback\": \"default\", \"error_feedback_used\": \"none\".*\"reached\": false, \"bytes_estimated\": ${_estimated}.*\"step\": ${_last}, [^]]*\"bytes_per_step\": [1-9][^]]*\]}")
  else()
    set(_pass "\"reached\": true.*\"points\": \\[{\"step\": 0, [^}]*}\\]}")
  endif()
  set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi;example" PROCESSORS 2
    ENVIRONMENT "${_torch_env}" RESOURCE_LOCK example_05_port
    PASS_REGULAR_EXPRESSION "${_pass}"
    FAIL_REGULAR_EXPRESSION "Traceback")
endforeach()

# Example 04's time-to-accuracy mode: a few steps with the runtime's and DDP's exchanges end with
# the JSON line bench/tta/make_report.py reads; a target already met stops before the first step.
foreach(_case "arctopk|0|4" "randk|0|4" "ddp-powersgd|0|4" "ddp-hook|0|4" "dense|1|0")
  string(REPLACE "|" ";" _fields "${_case}")
  list(GET _fields 0 _variant)
  list(GET _fields 1 _target)
  list(GET _fields 2 _last)
  set(_name example_04_tta_${_variant}_target${_target}_np2)
  add_test(NAME ${_name}
    COMMAND ${PROJECT_BINARY_DIR}/launcher/arcrun -np 2 -x MASTER_ADDR=127.0.0.1
            -x MASTER_PORT=29533 -- ${ARCREDUCE_TORCH_PYTHON}
            ${PROJECT_SOURCE_DIR}/examples/04_pytorch_fashion_mnist/train.py
            --variant ${_variant} --tta --max-steps 4 --eval-every 2 --target-accuracy ${_target}
            --train-samples 512 --test-samples 256 --batch-size 32
            --data-dir ${ARCREDUCE_FASHION_MNIST_DIR})
  if(_target EQUAL 0)
    set(_pass "\"bench\": \"tta\".*\"reached\": false.*\"step\": ${_last}, [^]]*\\]}")
  else()
    set(_pass "\"bench\": \"tta\".*\"reached\": true.*\"points\": \\[{\"step\": 0, [^}]*}\\]}")
  endif()
  set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi;example" PROCESSORS 2
    ENVIRONMENT "${_torch_env}" RESOURCE_LOCK example_04_port
    PASS_REGULAR_EXPRESSION "${_pass}"
    FAIL_REGULAR_EXPRESSION "Traceback")
endforeach()

# ARCREDUCE_PRESET=paper through the examples: examples/04 pairs its EF21M with SGD as the paper
# does (no momentum, lr / eta) instead of being refused, and compresses after a warm-up of 2
# steps; examples/05's AdamW keeps the preset's ratio 0.2 (not the adaptive default).
set(_name example_04_preset_paper_np2)
add_test(NAME ${_name}
  COMMAND ${PROJECT_BINARY_DIR}/launcher/arcrun -np 2 -x MASTER_ADDR=127.0.0.1
          -x MASTER_PORT=29533 -x ARCREDUCE_PRESET=paper -x ARCREDUCE_WARMUP_STEPS=2
          -- ${ARCREDUCE_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/examples/04_pytorch_fashion_mnist/train.py
          --variant arctopk --tta --max-steps 4 --eval-every 2 --target-accuracy 0
          --train-samples 512 --test-samples 256 --batch-size 32
          --data-dir ${ARCREDUCE_FASHION_MNIST_DIR})
set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi;example" PROCESSORS 2
  ENVIRONMENT "${_torch_env}" RESOURCE_LOCK example_04_port
  PASS_REGULAR_EXPRESSION "SGD runs without momentum at lr 0.5.*\"error_feedback_used\": \"ef21m\".*\"step\": 4, [^]]*\"bytes_per_step\": [1-9]"
  FAIL_REGULAR_EXPRESSION "Traceback")
set(_name example_05_preset_paper_np2)
add_test(NAME ${_name}
  COMMAND ${PROJECT_BINARY_DIR}/launcher/arcrun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29531
          -x ARCREDUCE_PRESET=paper -x ARCREDUCE_WARMUP_STEPS=2
          -- ${ARCREDUCE_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/examples/05_char_transformer/train.py
          --variant arctopk --steps 4 --eval-every 2 --eval-batches 1 --batch-size 2
          --context 16 --width 32 --layers 1 --heads 2 --json)
set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi;example" PROCESSORS 2
  ENVIRONMENT "${_torch_env}" RESOURCE_LOCK example_05_port
  PASS_REGULAR_EXPRESSION "\"ratio_used\": 0.2, \"error_feedback\": \"default\", \"error_feedback_used\": \"ef21m\""
  FAIL_REGULAR_EXPRESSION "Traceback")

# bench/e2e/torch_step_bench.py's overlap measurement: a few interleaved compute-only,
# communication-only and overlapped steps through arcreduce.torch end with the "overlap" line,
# after the step line; it is refused for a variant without arcreduce.
foreach(_variant dense arctopk)
  set(_name bench_torch_step_overlap_${_variant}_np2)
  add_test(NAME ${_name}
    COMMAND ${PROJECT_BINARY_DIR}/launcher/arcrun -np 2
            -- ${ARCREDUCE_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/bench/e2e/torch_step_bench.py
            --variant ${_variant} --model fmnist-mlp --steps 2 --warmup 1 --overlap-steps 3
            --train-samples 512 --data-dir ${ARCREDUCE_FASHION_MNIST_DIR})
  set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi" PROCESSORS 2
    ENVIRONMENT "${_torch_env}"
    PASS_REGULAR_EXPRESSION "\"bench\": \"e2e\".*\"bench\": \"overlap\".*\"variant\": \"${_variant}\".*\"steps\": 3.*\"compute_s\": [0-9.]+, \"communication_s\": [0-9.]+, \"overlapped_s\": [0-9.]+, \"overlapped_over_sum\": [0-9.]+, \"longest_rank\": {\"compute_s\": [0-9.]+, \"communication_s\": [0-9.]+, \"overlapped_s\": [0-9.]+}, \"longest_rank_overlapped_over_sum\": [0-9.]+}"
    FAIL_REGULAR_EXPRESSION "Traceback")
endforeach()
set(_name bench_torch_step_overlap_refused_for_floor)
add_test(NAME ${_name}
  COMMAND ${ARCREDUCE_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/bench/e2e/torch_step_bench.py
          --variant floor --overlap-steps 3)
set_tests_properties(${_name} PROPERTIES TIMEOUT 60 LABELS "torch"
  ENVIRONMENT "${_torch_env}"
  PASS_REGULAR_EXPRESSION "--overlap-steps takes a count >= 0, and only with --variant dense or arctopk")

# A rank killed under `arcrun --restarts` (bench/e2e/elastic_restart.py): the job is started
# again, resumes from its last commit (batch 10 of a kill after batch 12) and ends bit-identical
# to a run that never stopped (the compression set, so that the resume, inside the trial at the
# defaults, cannot decide otherwise; the defaults are the next test's).
set(_name torch_elastic_kill_and_restart_np2)
set(_elastic ${PROJECT_SOURCE_DIR}/bench/e2e/elastic_restart.py)
add_test(NAME ${_name}
  COMMAND bash -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; \
    $0 -np 2 --restarts 2 --elastic-dir $d/commits -x ARCREDUCE_AUTO_COMPRESS=0 -- $1 $2 $d/killed.pt --kill-at 12; \
    $0 -np 2 -x ARCREDUCE_AUTO_COMPRESS=0 -- $1 $2 $d/reference.pt; $1 $2 --compare $d/killed.pt $d/reference.pt"
    ${PROJECT_BINARY_DIR}/launcher/arcrun ${ARCREDUCE_TORCH_PYTHON} ${_elastic})
set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi" PROCESSORS 2
  ENVIRONMENT "${_torch_env}"
  PASS_REGULAR_EXPRESSION "restart 1 of 2.*\"resumed_from\": 10.*\"resumed_from\": 0.*bit-identical"
  FAIL_REGULAR_EXPRESSION "Traceback")

# The same at the runtime's defaults (ARCREDUCE_AUTO_COMPRESS=1), killed after batch 17: the
# commit at batch 15 holds the compression's decision (taken after batch 11), and the relaunch
# goes on as decided whichever tensor its first bucket holds, bit-identical to a run that never
# stopped. (A job resumed inside the trial decides again with its own timing, which may choose
# otherwise: docs/elastic.md.)
set(_name torch_elastic_kill_and_restart_defaults_np2)
add_test(NAME ${_name}
  COMMAND bash -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; \
    $0 -np 2 --restarts 2 --elastic-dir $d/commits -- $1 $2 $d/killed.pt --kill-at 17; \
    $0 -np 2 -- $1 $2 $d/reference.pt; $1 $2 --compare $d/killed.pt $d/reference.pt"
    ${PROJECT_BINARY_DIR}/launcher/arcrun ${ARCREDUCE_TORCH_PYTHON} ${_elastic})
set_tests_properties(${_name} PROPERTIES TIMEOUT 180 LABELS "torch;mpi" PROCESSORS 2
  ENVIRONMENT "${_torch_env}"
  PASS_REGULAR_EXPRESSION "restart 1 of 2.*\"resumed_from\": 15.*\"resumed_from\": 0.*bit-identical"
  FAIL_REGULAR_EXPRESSION "Traceback")
