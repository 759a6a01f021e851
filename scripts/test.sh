#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole CTest suite (unit, multi-process, install
# and format tests), then the fuzz targets and the sanitizer stage (scripts/sanitize.sh:
# ASan+UBSan and TSan builds of the library and its tests; ARCREDUCE_SKIP_SANITIZERS=1 skips it
# in local runs). Arguments go to the main suite's ctest (e.g. -L mpi, -R install).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The skip switch belongs to these scripts, not to the runtime, which rejects unknown ARCREDUCE_*
# variables: keep it out of the tests' environment.
skip_sanitizers=${ARCREDUCE_SKIP_SANITIZERS:-0}
unset ARCREDUCE_SKIP_SANITIZERS
build_dir=${BUILD_DIR:-$root/build}

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

# Three CTest slots per core (6 on a 2-core CI machine). Multi-process tests declare PROCESSORS =
# ranks (the fault-injection tests, which mostly wait, 1), so at most six ranks run at once. The
# tests mostly wait (mpirun's start, stall timeouts, sleeping ranks): at two slots per core the
# machine was 69-77% busy and this run took 214-236 s, at three 90% and 162 s, at four the same
# 162 s (docs/results/build-times.md).
ctest --test-dir "$build_dir" --output-on-failure -j "${CTEST_PARALLEL_LEVEL:-$((3 * $(nproc)))}" "$@"
bash "$root/scripts/fuzz.sh"  # libFuzzer targets, FUZZ_SECONDS each (default 15 s, 6 targets)
if [[ $skip_sanitizers == 1 ]]; then export ARCREDUCE_SKIP_SANITIZERS=1; fi
bash "$root/scripts/sanitize.sh"  # ASan+UBSan and TSan builds and their tests (docs/design/reliability.md)
