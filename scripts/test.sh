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

# Four slots, two per core of a 2-core CI machine: multi-process tests declare PROCESSORS = ranks
# (the fault-injection tests, which mostly wait, 2), so at most four ranks run at once, as in a
# single 4-rank test, and two 2-rank tests or a waiting fault test and another test share the
# machine instead of taking turns (docs/building.md).
ctest --test-dir "$build_dir" --output-on-failure -j "${CTEST_PARALLEL_LEVEL:-4}" "$@"
bash "$root/scripts/fuzz.sh"  # libFuzzer targets, FUZZ_SECONDS each (default 15 s, 6 targets)
if [[ $skip_sanitizers == 1 ]]; then export ARCREDUCE_SKIP_SANITIZERS=1; fi
bash "$root/scripts/sanitize.sh"  # ASan+UBSan and TSan builds and their tests (docs/reliability.md)
