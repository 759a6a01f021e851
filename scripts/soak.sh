#!/usr/bin/env bash
# Soak of the runtime (docs/design/reliability.md, "Soak"): the reduce loop of the fault tests
# (tests/faults/reduce_loop.cc) for STEPS steps on 4 local ranks, once per compressor, sampling
# every rank's resident memory (VmRSS), open file descriptors and threads every SOAK_EVERY steps.
# Prints one table row per compressor: time, RSS after warm-up and at the end (largest rank),
# the RSS slope after warm-up (least squares, bytes per step, largest rank), descriptors and
# threads at the start, after warm-up and at the end, and whether every rank ends with the same
# parameters (hash compared across ranks).
#
#   bash scripts/soak.sh                 # 20,000 steps per compressor (about 2 minutes on 2 cores)
#   SOAK_STEPS=2000 bash scripts/soak.sh # shorter
#
# Settings (environment): BUILD_DIR (build/), SOAK_STEPS (20000), SOAK_RANKS (4), SOAK_EVERY
# (500), SOAK_WARMUP (a tenth of the steps), SOAK_WIDTH (128: tensors of 2W x W, W x W and W
# floats), SOAK_COMPRESSORS (all seven), SOAK_MAX_SLOPE (64 bytes/step). Exit status 1 when a
# run fails, replicas differ, descriptors or threads grow after warm-up, or RSS grows faster
# than SOAK_MAX_SLOPE; the table is printed either way. Needs a build with tests
# (bash scripts/build.sh) and Open MPI's or MPICH's mpirun.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
program=$build/tests/faults/fault_reduce_loop
steps=${SOAK_STEPS:-20000}
ranks=${SOAK_RANKS:-4}
every=${SOAK_EVERY:-500}
warmup=${SOAK_WARMUP:-$((steps / 10))}
width=${SOAK_WIDTH:-128}
max_slope=${SOAK_MAX_SLOPE:-64}
read -r -a compressors <<<"${SOAK_COMPRESSORS:-none fp16 topk randk arctopk oktopk powersgd}"

[[ -x "$program" ]] || { echo "soak: $program not found; build with tests first (bash scripts/build.sh)" >&2; exit 1; }
mpirun=(mpirun -np "$ranks")
if mpirun --version 2>/dev/null | grep -qE 'Open MPI|OpenRTE'; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpirun+=(--oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none)
fi

# Error feedback on the sparsifiers, so that its buffers are part of what is soaked; the same
# choice as the fault tests' resume scenario.
feedback_of() {
  case $1 in
    topk) echo ef14 ;;
    randk) echo ef21m ;;
    arctopk) echo ef21 ;;
    *) echo none ;;
  esac
}

# The bracketed list after KEY= on the "soak: WHAT" line, one value a line.
values() { grep -m1 "^soak: $2 " "$1" | sed -E "s/.* $3=\[([^]]*)\].*/\1/" | tr ',' '\n'; }
max_of() { sort -g | tail -1; }
range() { echo "$(values "$1" "$2" "$3" | sort -g | head -1)-$(values "$1" "$2" "$3" | max_of)"; }

log=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-soak.XXXXXX")
trap 'rm -rf "$log"' EXIT
echo "soak: $steps steps x ${#compressors[@]} compressors on $ranks ranks (width $width," \
  "samples every $every steps, warm-up $warmup steps), $(date -u '+%Y-%m-%d %H:%M UTC')," \
  "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "| compressor | error feedback | steps | s | steps/s | RSS MB after warm-up | RSS MB end | RSS slope B/step | fds start / warm / end | threads start / warm / end | replicas |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
failed=0
for c in "${compressors[@]}"; do
  ef=$(feedback_of "$c")
  out="$log/$c.out"
  rc=0
  ARCREDUCE_ERROR_FEEDBACK=$ef "${mpirun[@]}" "$program" --steps "$steps" --width "$width" \
    --compressor "$c" --sample-every "$every" --warmup-steps "$warmup" --check-soak \
    --max-rss-slope "$max_slope" >"$out" 2>&1 || rc=$?
  if ! grep -q '^final:' "$out"; then
    echo "| $c | $ef | failed (exit $rc) | | | | | | | | |"
    sed 's/^/    /' "$out" >&2
    failed=1
    continue
  fi
  ((rc == 0)) || failed=1
  final=$(grep -m1 '^final:' "$out")
  field() { tr ' ' '\n' <<<"$final" | awk -F= -v k="$1" '$1 == k { print $2 }'; }
  rss_warm=$(values "$out" rss_kb warm | max_of)
  rss_end=$(values "$out" rss_kb end | max_of)
  slope=$(grep -m1 '^soak: rss_kb ' "$out" | sed -E 's/.* max=([-0-9.]+).*/\1/')
  printf '| %s | %s | %s | %s | %s | %.1f | %.1f | %s | %s / %s / %s | %s / %s / %s | %s |\n' \
    "$c" "$ef" "$steps" "$(field seconds)" "$(field steps_per_s)" \
    "$(awk -v k="$rss_warm" 'BEGIN { print k / 1024 }')" "$(awk -v k="$rss_end" 'BEGIN { print k / 1024 }')" \
    "$slope" "$(range "$out" fds start)" "$(range "$out" fds warm)" "$(range "$out" fds end)" \
    "$(range "$out" threads start)" "$(range "$out" threads warm)" "$(range "$out" threads end)" \
    "$(field replicas)"
  grep '^soak: FAILED' "$out" >&2 || true
done
echo
echo "(RSS: largest rank; slope: least squares over the samples after warm-up, largest rank;" \
  "fds and threads: smallest-largest over the ranks)"
exit "$failed"
