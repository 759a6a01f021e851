#!/usr/bin/env bash
# Builds (if needed) and runs bench/dense_bench on this machine at 2 and 4 ranks, printing each
# command and its raw output (docs/benchmarks.md records them). Arguments go to dense_bench,
# e.g. --repetitions 20. $RANK_COUNTS overrides "2 4".
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}

if ! build_log=$(bash "$root/scripts/build.sh" 2>&1); then
  echo "$build_log" >&2
  exit 1
fi
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown && -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then
  commit+="+dirty"
fi

export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers forbid cross-memory attach
for ranks in ${RANK_COUNTS:-2 4}; do
  cmd=("$build_dir/launcher/arcrun" -np "$ranks" -- "$build_dir/bench/dense_bench"
       --commit "$commit" "$@")
  echo "\$ ${cmd[*]#"$root/"}"
  "${cmd[@]}"
  echo
done
