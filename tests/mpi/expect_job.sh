#!/usr/bin/env bash
# Runs a job (usually mpirun ...) and checks how it ended. Used by CTest for tests whose
# expected outcome is a failing job (stall shutdown, a killed rank) or a log line.
#
#   expect_job.sh [--exit nonzero|zero] [--within SECONDS] [--expect REGEX]... \
#                 [--reject REGEX]... -- COMMAND [ARGS...]
#
#   --exit nonzero  the job must fail (default); zero: it must succeed
#   --within S      the job must end by itself within S seconds (default 60); it is killed
#                   after that and the test fails
#   --expect RE     the combined stdout+stderr must match RE (grep -E, case-insensitive)
#   --reject RE     ... and must not match RE
# Prints the job's output, then one line per failed check; exits 0 only if all checks pass.
set -u

want_exit=nonzero
within=60
expects=()
rejects=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --exit) want_exit="$2"; shift 2 ;;
    --within) within="$2"; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --reject) rejects+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "expect_job.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $# -eq 0 ]]; then
  echo "expect_job.sh: no command given" >&2
  exit 2
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
# --kill-after: mpirun gets SIGTERM first so it can clean up its ranks.
timeout --kill-after=10 "$within" "$@" >"$log" 2>&1
rc=$?
end=$(date +%s.%N)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')

echo "----- job output: $* -----"
cat "$log"
echo "----- end of job output (exit code $rc after ${elapsed}s) -----"

failures=0
fail() {
  echo "CHECK FAILED: $*"
  failures=$((failures + 1))
}

# timeout(1) exits 124 (or 137 after --kill-after); a job whose rank died of SIGKILL can also
# exit 137, so the elapsed time decides.
timed_out=$(awk -v e="$elapsed" -v w="$within" 'BEGIN { print (e >= w - 0.5) ? 1 : 0 }')
if [[ $rc -eq 124 || ($rc -eq 137 && $timed_out -eq 1) ]]; then
  fail "the job did not end within ${within}s (killed by timeout)"
elif [[ $want_exit == nonzero && $rc -eq 0 ]]; then
  fail "the job must fail (non-zero exit), but it exited 0"
elif [[ $want_exit == zero && $rc -ne 0 ]]; then
  fail "the job must succeed, but it exited $rc"
fi
for re in "${expects[@]+"${expects[@]}"}"; do
  grep -E -i -q -e "$re" "$log" || fail "output does not match /$re/"
done
for re in "${rejects[@]+"${rejects[@]}"}"; do
  if grep -E -i -q -e "$re" "$log"; then
    fail "output matches /$re/:"
    grep -E -i -e "$re" "$log" | head -5
  fi
done

if [[ $failures -eq 0 ]]; then
  echo "PASS: exit code $rc after ${elapsed}s, all output checks passed"
  exit 0
fi
echo "FAIL: $failures check(s) failed"
exit 1
