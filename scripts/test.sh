#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole CTest suite (unit, multi-process, install
# and format tests), then the fuzz targets and the sanitizer stage (scripts/sanitize.sh:
# ASan+UBSan and TSan builds of the library and its tests; ARCREDUCE_SKIP_SANITIZERS=1 skips it
# in local runs). Arguments go to the main suite's ctest (e.g. -L mpi, -R install).
#
# The sanitizer builds compile in the background at the lowest CPU priority (SCHED_IDLE) while
# the main suite and the fuzz targets run: they take only the CPU time that the suite's tests
# leave idle (waiting for peers, timeouts, retransmissions), never a core a test wants
# (docs/building.md, "What the whole suite costs"). Their tests run after the main suite, each
# once its build is done.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The skip switch belongs to these scripts, not to the runtime, which rejects unknown ARCREDUCE_*
# variables: keep it out of the tests' environment.
skip_sanitizers=${ARCREDUCE_SKIP_SANITIZERS:-0}
unset ARCREDUCE_SKIP_SANITIZERS
build_dir=${BUILD_DIR:-$root/build}

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

# idle CMD...: CMD at the lowest priority: SCHED_IDLE where chrt can set it, else nice 19.
idle() {
  if chrt --idle 0 true 2>/dev/null; then
    chrt --idle 0 "$@"
  else
    nice -n 19 "$@"
  fi
}

background=""
sanitizer_logs=""
if [[ $skip_sanitizers != 1 ]]; then
  sanitizer_logs=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-sanitize.XXXXXX")
  # One build after the other (each compiles with 2 jobs); <build>.rc appears when it is done.
  (
    for b in asan tsan; do
      rc=0
      idle bash "$root/scripts/sanitize.sh" --build-only "$b" >"$sanitizer_logs/$b.log" 2>&1 || rc=$?
      echo "$rc" >"$sanitizer_logs/$b.rc"
    done
  ) &
  background=$!
fi
descendants() {
  local p
  for p in $(pgrep -P "$1"); do
    echo "$p"
    descendants "$p"
  done
}
cleanup() {
  # A failure above ends the script: the background builds (make, the compilers) end with it.
  if [[ -n "$background" ]] && kill -0 "$background" 2>/dev/null; then
    # shellcheck disable=SC2046  # one pid per word
    kill -TERM "$background" $(descendants "$background") 2>/dev/null || true
    wait "$background" 2>/dev/null || true
  fi
  [[ -z "$sanitizer_logs" ]] || rm -rf "$sanitizer_logs"
}
trap cleanup EXIT

# Four slots, two per core of a 2-core CI machine: multi-process tests declare PROCESSORS = ranks
# (the fault-injection tests, which mostly wait, 2), so at most four ranks run at once, as in a
# single 4-rank test, and two 2-rank tests or a waiting fault test and another test share the
# machine instead of taking turns (docs/building.md).
ctest --test-dir "$build_dir" --output-on-failure -j "${CTEST_PARALLEL_LEVEL:-4}" "$@"
bash "$root/scripts/fuzz.sh"  # libFuzzer targets, FUZZ_SECONDS each (default 15 s, 6 targets)

if [[ $skip_sanitizers == 1 ]]; then
  ARCREDUCE_SKIP_SANITIZERS=1 bash "$root/scripts/sanitize.sh"
  exit 0
fi
# Each sanitizer build's tests (docs/reliability.md), once that build is done; the TSan build
# goes on in the background while the ASan tests run. Both builds' tests run even if the first
# fails.
failed=()
for b in asan tsan; do
  until [[ -s "$sanitizer_logs/$b.rc" ]]; do
    kill -0 "$background" 2>/dev/null || [[ -s "$sanitizer_logs/$b.rc" ]] ||
      { echo "test: the background sanitizer builds ended before the $b build" >&2; exit 1; }
    sleep 1
  done
  cat "$sanitizer_logs/$b.log"
  if [[ "$(cat "$sanitizer_logs/$b.rc")" != 0 ]]; then
    echo "test: the $b build failed" >&2
    failed+=("$b")
    continue
  fi
  bash "$root/scripts/sanitize.sh" --tests-only "$b" || failed+=("$b")
done
if ((${#failed[@]} > 0)); then
  echo "test: sanitizer stage failed in ${failed[*]}" >&2
  exit 1
fi
echo "test: main suite, fuzz targets and sanitizer stage passed"
