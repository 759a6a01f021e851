#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan, -DARCREDUCE_FUZZ=ON) in
# $FUZZ_BUILD_DIR (default build-fuzz/) and runs each for FUZZ_SECONDS seconds (default 15;
# FUZZ_SECONDS=600 for a longer search), FUZZ_JOBS (default 2) at a time (the six targets: about
# 45 s in CI), starting from the checked-in seeds (fuzz/corpus/<target>) and the inputs of
# earlier runs. Exits non-zero when any target finds a crash, hang, leak or broken contract; the
# inputs that did are kept in $FUZZ_BUILD_DIR/crashes/<target>/ (ignored by git) and the log in
# $FUZZ_BUILD_DIR/logs/.
# Arguments: target names to run (default: all), e.g. `bash scripts/fuzz.sh state message`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-15}
targets=("$@")
if ((${#targets[@]} == 0)); then targets=(config arcrun hostfile state message idx); fi

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz: $tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done

# Only the fuzz targets are built: each compiles the parser's sources itself, instrumented. With
# Ninja where it is installed: CMake's Makefiles build listed targets one after the other (26 s
# against Ninja's 16 s). CMake refuses to reconfigure a directory with another generator than its
# cache names, so such a cache (an earlier version of this script) goes; the corpus stays.
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [[ -f "$build_dir/CMakeCache.txt" ]] &&
  ! grep -qx "CMAKE_GENERATOR:INTERNAL=${generator[1]:-Unix Makefiles}" "$build_dir/CMakeCache.txt"; then
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DARCREDUCE_FUZZ=ON \
  -DARCREDUCE_BUILD_TESTS=OFF -DARCREDUCE_BUILD_EXAMPLES=OFF -DARCREDUCE_BUILD_BENCH=OFF \
  -DARCREDUCE_CUDA=OFF -DARCREDUCE_TORCH=OFF >"$build_dir.configure.log" 2>&1 ||
  { cat "$build_dir.configure.log" >&2; exit 1; }
rm -f "$build_dir.configure.log"
cmake --build "$build_dir" -j "${FUZZ_JOBS:-2}" --target "${targets[@]/%/_fuzz}"

# run_target <target>: one libFuzzer run; its summary line (or the failure) printed at the end.
run_target() {
  local target=$1
  local corpus=$build_dir/corpus/$target  # grows from run to run; the seeds stay as checked in
  local crashes=$build_dir/crashes/$target
  local log=$build_dir/logs/$target.log
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb/-malloc_limit_mb: a parser must
  # not allocate far beyond what its input can fill.
  if "$build_dir/fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
      -artifact_prefix="$crashes/" "$corpus" "$root/fuzz/corpus/$target" >"$log" 2>&1; then
    grep -aE '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 | sed "s/^/fuzz: $target: /" || true
  else
    echo "fuzz: $target FAILED; inputs in $crashes, log $log:" >&2
    grep -aE 'ERROR|contract violated|SUMMARY|Test unit written' "$log" | head -20 >&2 || true
    return 1
  fi
}

# FUZZ_JOBS targets at a time (default 2, one per core of a CI machine): each libFuzzer run is
# one process on one core, so the stage takes the time of its targets divided by FUZZ_JOBS.
jobs=${FUZZ_JOBS:-2}
declare -A running=()  # pid -> target
failed=()
reap() {  # waits for one running target to end and records whether it failed
  local pid rc=0
  wait -n -p pid "${!running[@]}" || rc=$?
  ((rc == 0)) || failed+=("${running[$pid]}")
  unset "running[$pid]"
}
for target in "${targets[@]}"; do
  while ((${#running[@]} >= jobs)); do reap; done
  echo "fuzz: $target for ${seconds}s"
  run_target "$target" &
  running[$!]=$target
done
while ((${#running[@]} > 0)); do reap; done

if ((${#failed[@]} > 0)); then
  echo "fuzz: failures in ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s), ${seconds}s each, no failure"
