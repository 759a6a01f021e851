#!/usr/bin/env bash
# The sanitizer stage of the test suite (docs/design/reliability.md, "Sanitizers"), run by
# scripts/test.sh after the main suite. Builds the library and its tests twice with CUDA off
# (host code only):
#   asan: AddressSanitizer (with LeakSanitizer) + UndefinedBehaviorSanitizer, in $ASAN_BUILD_DIR
#         (default build-asan/); runs the in-process tests (gtest binaries, ranks as threads over
#         the loopback communicator) and the multi-process tests under mpirun, except the
#         simulated-cluster, fault-injection and install tests.
#   tsan: ThreadSanitizer, in $TSAN_BUILD_DIR (default build-tsan/); runs the in-process tests and
#         the multi-process tests listed in TSAN_MPI_TESTS below.
# Reports inside Open MPI are suppressed by tests/sanitizers/tsan.supp, Thrust's one UBSan report
# by tests/sanitizers/ubsan.supp; LeakSanitizer runs in the in-process tests only
# (tests/sanitizers/lsan.supp says why). Every other report fails the stage: each sanitizer stops
# the process at its first report, and ASan and TSan also write each process's reports to
# <build dir>/sanitizer-reports/, which must stay empty, so their reports fail the stage even in a
# test whose job is expected to fail (stall, killed rank). UBSan's reports go to the test output.
#
#   bash scripts/sanitize.sh [asan] [tsan]   # default: both
#
# ARCREDUCE_SKIP_SANITIZERS=1 skips the stage (for local runs only; CI runs it). SANITIZE_JOBS:
# parallel compile jobs (default 2); CTEST_PARALLEL_LEVEL: CTest's slots (default 2 per core for
# the in-process tests, 4 per core for the multi-process ones).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ "${ARCREDUCE_SKIP_SANITIZERS:-0}" == 1 ]]; then
  echo "sanitize: skipped (ARCREDUCE_SKIP_SANITIZERS=1)"
  exit 0
fi
# The switch is these scripts', not the runtime's: the runtime rejects unknown ARCREDUCE_*
# variables, so the tests below must not inherit it (whatever its value).
unset ARCREDUCE_SKIP_SANITIZERS
builds=("$@")
if ((${#builds[@]} == 0)); then builds=(asan tsan); fi
supp=$root/tests/sanitizers
jobs=${SANITIZE_JOBS:-2}
# Two slots per core for the in-process tests (CPU-bound: 90% busy at one per core), four for the
# multi-process ones, which mostly wait (ASan's: 115 s at two per core, 77-78 s at three, 65 s at
# four; docs/results/build-times.md).
unit_slots=${CTEST_PARALLEL_LEVEL:-$((2 * $(nproc)))}
mpi_slots=${CTEST_PARALLEL_LEVEL:-$((4 * $(nproc)))}

# Multi-process tests run under TSan too: the runtime's threads (coordinator, callers of the API)
# with real MPI underneath, at 1 and 2 ranks.
TSAN_MPI_TESTS='^(runtime_reinit_while_synchronizing_np[12]|runtime_allreduce_np2|runtime_shutdown_by_all_np2|ops_communicator_ring_np2)$'
TSAN_SKIPPED_DTYPES='^WorldsDtypesOps/AllreduceTest[.]MatchesReferenceOnEveryRank/np[0-9]+_(float64|float16|bfloat16)_'
TSAN_SKIPPED_SIZES='^WorldsDtypesOps/AllreduceTest[.]MatchesReferenceOnEveryRank/np[5-8]_|^WorldSizes/LoopbackSizeTest[.]AllreduceEveryTypeOpAndCount/size[5-8]([^0-9]|$)'

# configure_and_build <dir> <sanitizers> [targets...]: -O1 (quicker to compile than the main
# build's -O2, and the tests still run at a useful speed), -g1 for the reports' stacks, NDEBUG as
# in the main build, a unity build (docs/design/reliability.md, "Sanitizers"); without CUDA, examples,
# benchmarks or the fuzz replays (scripts/fuzz.sh runs those parsers under ASan and UBSan).
# A list of targets is built with Ninja where it is installed: CMake's Makefiles build listed
# targets one after the other, each on one core when it is one unity file (TSan's list: 96 s
# against Ninja's 63 s); every target (asan) builds as fast either way, so it keeps Makefiles.
configure_and_build() {
  local dir=$1 sanitizers=$2
  shift 2
  local log=$dir.configure.log generator=()
  if (($# > 0)) && command -v ninja >/dev/null; then generator=(-G Ninja); fi
  forget_other_generator "$dir" "${generator[1]:-Unix Makefiles}"
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DARCREDUCE_SANITIZE="$sanitizers" \
    -DARCREDUCE_CUDA=OFF -DARCREDUCE_TORCH=OFF -DARCREDUCE_BUILD_EXAMPLES=OFF \
    -DARCREDUCE_BUILD_BENCH=OFF >"$log" 2>&1 || { cat "$log" >&2; return 1; }
  rm -f "$log"
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
}

# forget_other_generator <dir> <generator>: CMake refuses to reconfigure a build directory with
# another generator than its cache names; where the cache names another (an earlier version of
# these scripts, or a machine without Ninja), the cache goes and the directory is configured anew.
forget_other_generator() {
  local cache=$1/CMakeCache.txt
  if [[ -f "$cache" ]] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$2" "$cache"; then
    rm -rf "$cache" "$1/CMakeFiles"
  fi
}

# check_reports <dir>: prints the sanitizer reports written under <dir>, fails if there are any.
check_reports() {
  local dir=$1 found=0
  for f in "$dir"/*; do
    [[ -s "$f" ]] || continue
    found=1
    echo "sanitize: report in $(basename "$f"):" >&2
    head -60 "$f" >&2
  done
  return "$found"
}

failed=()
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
for build in "${builds[@]}"; do
  start=$SECONDS
  case "$build" in
    asan)
      dir=${ASAN_BUILD_DIR:-$root/build-asan}
      configure_and_build "$dir" address,undefined
      # The simulated cluster and the fault injection start their ranks with a cleared environment
      # (no sanitizer options) in network namespaces; the install test builds another project.
      # Multi-process tests without LeakSanitizer: see tests/sanitizers/lsan.supp.
      # The Ok-Topk volume test is left out: a bound on bytes counted over 12 x 192 calls (38 s
      # here, with the inputs drawn in float), whose code paths the other OkTopK
      # tests run under ASan too; the main build runs it.
      # The wait modes other than the default run under ASan with the ring only: the waiting
      # code (ops/mpi_wait.h) is one for every algorithm, and the 8 cases of the other two
      # algorithms were 51 of the multi-process run's 303 test-seconds; the main build
      # runs them all.
      # Each run: LeakSanitizer on (1) or off, CTest's slots, the selection.
      runs=("1 $unit_slots -L unit -E ^timeline_|^OkTopK.VolumeOnOrdinaryCalls"
            "0 $mpi_slots -L mpi -LE cluster|faults|install|lint -E ^ops_communicator_(mpi|doubling)_wait_")
      ;;
    tsan)
      dir=${TSAN_BUILD_DIR:-$root/build-tsan}
      configure_and_build "$dir" thread ops_tests runtime_tests tensor_queue_tests \
        compressors_tests kernels_tests launcher_tests runtime_mpi_tests runtime_shutdown_test \
        runtime_reinit_test communicator_mpi_test
      # The tests of the gtest binaries, then the multi-process tests above. Left out: the
      # timeline checks (their job is not built here), the Ok-Topk volume test (arithmetic on one
      # thread per rank, over 2.5 minutes under TSan) and the All-Reduce matrix's float64,
      # float16 and bfloat16 cases: each world size 1-8 and op runs in float32, and a dtype
      # changes the arithmetic, not the threads' synchronisation (the 48 cases were 200 of this
      # stage's 430 test-seconds; the main and asan builds run them all). Nor do the two
      # All-Reduce matrices run at 5-8 ranks here (WorldsDtypesOps, LoopbackSizeTest's
      # AllreduceEveryTypeOpAndCount): 1-4 ranks, odd and even, run the same synchronisation
      # (the loopback's mailboxes, the runtime's queues) as more ranks, and the other tests of
      # LoopbackSizeTest still run at 1-8; the 12 cases were about 90 of 240 test-seconds.
      runs=("1 $unit_slots -L unit -E NOT_BUILT|^timeline_|^OkTopK.VolumeOnOrdinaryCalls|$TSAN_SKIPPED_DTYPES|$TSAN_SKIPPED_SIZES"
            "1 $unit_slots -R $TSAN_MPI_TESTS")
      ;;
    *)
      echo "sanitize: unknown build '$build' (asan or tsan)" >&2
      exit 2
      ;;
  esac
  built=$SECONDS
  reports=$dir/sanitizer-reports
  rm -rf "$reports"
  mkdir -p "$reports"
  # Inherited by every test process, mpirun's ranks included. log_path: one file per process
  # that reports (<tool>.<pid>); nothing is written by processes without a report.
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp:log_path=$reports/ubsan"
  # history_size=7 (the largest): Open MPI copies a message into a receive buffer on whichever
  # thread drives its progress, often long before the owner reads it; with the default history
  # TSan reports that copy with "failed to restore the stack", no frame for tsan.supp's Open MPI
  # entries to match, and the report fails the stage (seen in runtime_allreduce_np2).
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$supp/tsan.supp:log_path=$reports/tsan"
  status=ok
  for run in "${runs[@]}"; do
    read -r leaks slots selection <<<"$run"
    read -r -a selection <<<"$selection"  # no pattern above contains a space
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=$leaks:log_path=$reports/asan"
    out=$dir/ctest-run.log
    if ! ctest --test-dir "$dir" --output-on-failure -j "$slots" "${selection[@]}" 2>&1 | tee "$out"; then
      status=failed
      # CTest's own list of failures ("  649 - name (Timeout)"), kept for the summary below: a
      # run's output is long and the next build's follows it, so the end of the log names them.
      sed -n '/^The following tests FAILED:/,$p' "$out" | grep -E '^[[:space:]]+[0-9]+ - ' |
        sed "s/^[[:space:]]*/$build: /" >>"$summary" || true
    fi
  done
  if ! check_reports "$reports"; then
    status=failed
    for f in "$reports"/*; do
      if [[ -s "$f" ]]; then
        echo "$build: report in $(basename "$f"): $(grep -m1 -E 'ERROR|WARNING|runtime error' "$f")" >>"$summary"
      fi
    done
  fi
  unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS
  echo "sanitize: $build: $status (build $((built - start)) s, tests $((SECONDS - built)) s)"
  if [[ $status != ok ]]; then failed+=("$build"); fi
done

if ((${#failed[@]} > 0)); then
  echo "sanitize: failures in ${failed[*]}:" >&2
  sed 's/^/sanitize:   /' "$summary" >&2
  exit 1
fi
echo "sanitize: ${builds[*]}: no failure, no sanitizer report"
