# shellcheck shell=bash
# Sourced by the scripts/bench-*.sh benchmarks: building what a benchmark runs, naming the commit
# it measured, a scratch folder (with a simulated cluster's name) removed on exit, and printing
# commands without this machine's paths. Not a program of its own.

# bench_build BUILD_DIR TARGET...: builds the targets in an existing build folder, or the whole
# project through scripts/build.sh where there is none yet; on failure prints the build's
# output and returns 1.
bench_build() {
  local build_dir=$1 log
  shift
  local -a build
  if [[ -f "$build_dir/CMakeCache.txt" ]]; then
    build=(cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target "$@")
  else
    build=(env BUILD_DIR="$build_dir" bash "$(dirname "${BASH_SOURCE[0]}")/build.sh")
  fi
  if ! log=$("${build[@]}" 2>&1); then
    echo "$log" >&2
    return 1
  fi
}

# bench_commit ROOT: prints the checkout's short commit, with "+dirty" where tracked files have
# uncommitted changes ("unknown" outside git).
bench_commit() {
  local commit
  commit=$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ "$commit" != unknown &&
        -n "$(git -C "$1" status --porcelain --untracked-files=no)" ]]; then
    commit+="+dirty"
  fi
  echo "$commit"
}

# bench_scratch ROOT PREFIX LABEL: sets `dir` (a fresh scratch folder), `cluster_dir` (in it) and
# `name` (a simulated cluster's name: PREFIX and this process's id), and on exit takes down a
# cluster of that name and removes the folder; an interrupt exits with 130.
bench_scratch() {
  bench_scratch_root=$1
  name=$2$(($$ % 1000000))
  dir=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-bench-$3.XXXXXX")
  cluster_dir=$dir/cluster
  trap bench_scratch_cleanup EXIT
  trap 'exit 130' INT TERM
}
bench_scratch_cleanup() {
  bash "$bench_scratch_root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" \
    >/dev/null 2>&1 || true
  rm -rf "$dir"
}

# bench_host_budget HOSTS SETTING: the --cpus of a simulated cluster of HOSTS hosts for a
# benchmark's CPUS setting: "auto" gives the hosts 0.9 of this machine's cores between them
# (0.22 each for 8 hosts on 2 cores), 0 or "none" nothing (the hosts share the cores; prints ""),
# anything else is taken as the budget. A benchmark keeps its setting in a variable other than
# `cpus`, which a sourced cluster.env sets.
bench_host_budget() {
  case $2 in
    0 | none) echo "" ;;
    auto) awk -v n="$(nproc)" -v h="$1" 'BEGIN { printf "%.2f", int(90 * n / h) / 100 }' ;;
    *) echo "$2" ;;
  esac
}

# bench_show WORD...: prints a command as it would be typed, with the build folder as BUILD, the
# repository's prefix removed, the scratch cluster folder as DIR and words with spaces quoted
# (reads `build_dir`, `root` and `cluster_dir`).
bench_show() {
  local line='$' word
  for word in "$@"; do
    word=${word//"$build_dir"/BUILD}
    word=${word//"$root/"/}
    word=${word//"$cluster_dir"/DIR}
    [[ "$word" == *[[:space:]]* ]] && word="'$word'"
    line+=" $word"
  done
  echo "$line"
}

# bench_variant_env VARIANT: the arcrun words (-x NAME=VALUE ...) of the runtime settings a
# benchmark variant sets beside its program's flags (bench-tta.sh's and bench-lm-steps.sh's
# variant names); nothing for the others.
bench_variant_env() {
  case $1 in
    # The fixed ARC-Top-K of the runtime's former defaults, and a ratio set by hand: obeyed as
    # set (the example's --compress-ratio equal to the default would leave the choice on).
    arctopk-default | arctopk-[0-9]*) echo -x ARCREDUCE_AUTO_COMPRESS=0 ;;
    arctopk-random) echo -x ARCREDUCE_RANDOM_ROWS=1 ;;
    arctopk-random-efm) echo -x ARCREDUCE_RANDOM_ROWS=1 -x ARCREDUCE_EF_MASKING=0 ;;
    paper) echo -x ARCREDUCE_PRESET=paper ;;
    paper-warmup-*) echo -x ARCREDUCE_PRESET=paper -x "ARCREDUCE_WARMUP_STEPS=${1#paper-warmup-}" ;;
  esac
}
