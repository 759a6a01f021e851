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

# Two parallel tests suit a 2-core machine; multi-process tests declare PROCESSORS = ranks, so
# ctest never runs more ranks at once than that budget allows.
ctest --test-dir "$build_dir" --output-on-failure -j "${CTEST_PARALLEL_LEVEL:-2}" "$@"
bash "$root/scripts/fuzz.sh"  # libFuzzer targets, FUZZ_SECONDS each (default 15 s, 6 targets)
if [[ $skip_sanitizers == 1 ]]; then export ARCREDUCE_SKIP_SANITIZERS=1; fi
bash "$root/scripts/sanitize.sh"  # ASan+UBSan and TSan builds and their tests (docs/reliability.md)
