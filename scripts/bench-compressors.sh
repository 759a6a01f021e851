#!/usr/bin/env bash
# Builds (if needed) and runs bench/compressor_bench on this machine at 4 ranks, printing the
# command and its raw output (docs/benchmarks.md records them). Arguments go to
# compressor_bench, e.g. --repetitions 15 --ratios 0.01. $RANK_COUNTS overrides "4";
# $BUILD_DIR the build directory (default build/). An existing build directory is only
# rebuilt for the two targets used here, so the run does not wait for the whole tree.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}

if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  build=(cmake --build "$build_dir" -j "$(nproc)" --target compressor_bench arcrun)
else
  build=(env BUILD_DIR="$build_dir" bash "$root/scripts/build.sh")
fi
if ! build_log=$("${build[@]}" 2>&1); then
  echo "$build_log" >&2
  exit 1
fi
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown && -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then
  commit+="+dirty"
fi

export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers forbid cross-memory attach
for ranks in ${RANK_COUNTS:-4}; do
  cmd=("$build_dir/launcher/arcrun" -np "$ranks" -- "$build_dir/bench/compressor_bench"
       --commit "$commit" "$@")
  echo "\$ ${cmd[*]#"$root/"}"
  "${cmd[@]}"
  echo
done
