#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole CTest suite (unit, multi-process, install
# and format tests). Arguments go to ctest (e.g. -L mpi, -R install).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

# Two parallel tests suit a 2-core machine; multi-process tests declare PROCESSORS = ranks, so
# ctest never runs more ranks at once than that budget allows.
ctest --test-dir "$build_dir" --output-on-failure -j "${CTEST_PARALLEL_LEVEL:-2}" "$@"
