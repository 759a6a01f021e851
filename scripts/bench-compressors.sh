#!/usr/bin/env bash
# Builds (if needed) and runs bench/compressor_bench on this machine at 4 ranks, printing the
# command and its raw output (docs/benchmarks.md records them). Arguments go to
# compressor_bench, e.g. --repetitions 15 --ratios 0.01. $RANK_COUNTS overrides "4";
# $BUILD_DIR the build directory (default build/). An existing build directory is only
# rebuilt for the two targets used here, so the run does not wait for the whole tree.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}

# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"
bench_build "$build_dir" compressor_bench arcrun || exit 1
commit=$(bench_commit "$root")

export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers forbid cross-memory attach
for ranks in ${RANK_COUNTS:-4}; do
  cmd=("$build_dir/launcher/arcrun" -np "$ranks" -- "$build_dir/bench/compressor_bench"
       --commit "$commit" "$@")
  echo "\$ ${cmd[*]#"$root/"}"
  "${cmd[@]}"
  echo
done
