#!/usr/bin/env bash
# A fault driver killed at its time limit leaves nothing behind: run_faults.sh is started in a
# session of its own with a simulated cluster whose hosts have CPU budgets, and once the cluster
# is up, the driver's whole process group gets SIGKILL (no trap runs, as when CTest's TIMEOUT
# kills a test). Within 30 s no namespace, bridge, link or cgroup of the cluster may remain.
#
#   killed_driver_cleans_up.sh RUN_FAULTS SIM_CLUSTER_SCRIPT ARCRUN REDUCE_LOOP
#
# Exit codes: 0 passed, 1 failed, 77 skipped (the cluster cannot be built here).
set -uo pipefail

(($# == 4)) || { echo "usage: killed_driver_cleans_up.sh RUN_FAULTS SIM ARCRUN REDUCE_LOOP" >&2; exit 2; }
driver=$1
name=arck$(($$ % 100000))
out=$(mktemp)
trap 'rm -f "$out"' EXIT

leftovers() {
  local found=""
  found+=$(ip netns list 2>/dev/null | awk -v n="$name-h" 'index($1, n) == 1 { printf " netns %s", $1 }')
  found+=$(ip -o link show 2>/dev/null | awk -F': ' -v n="$name" 'index($2, n) == 1 { printf " link %s", $2 }')
  found+=$(find /sys/fs/cgroup -maxdepth 3 -type d -name "arcreduce-sim-$name" 2>/dev/null | sed 's/^/ cgroup /' | tr '\n' ' ')
  echo "$found"
}

FAULT_CLUSTER_NAME=$name FAULT_CPUS=0.5 setsid bash "$driver" link_flap "$2" "$3" "$4" >"$out" 2>&1 &
pid=$!
deadline=$((SECONDS + 90))
until ip netns list 2>/dev/null | grep -q "^$name-h4"; do
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    rc=$?
    cat "$out"
    ((rc == 77)) && { echo "killed_driver: skipped (the driver skipped)"; exit 77; }
    echo "killed_driver: FAILED: the driver ended (exit $rc) before its cluster was up"
    exit 1
  fi
  ((SECONDS < deadline)) || { cat "$out"; kill -9 -- "-$pid"; echo "killed_driver: FAILED: no cluster within 90 s"; exit 1; }
  sleep 0.2
done
sleep 2  # the first job is starting on the hosts
echo "killed_driver: cluster $name is up; SIGKILL to the driver's process group"
kill -9 -- "-$pid" 2>/dev/null
wait "$pid" 2>/dev/null
deadline=$((SECONDS + 30))
while true; do
  left=$(leftovers)
  [[ -n "$left" ]] || break
  if ((SECONDS >= deadline)); then
    echo "killed_driver: FAILED: 30 s after the kill, still there:$left"
    bash "$2" down --name "$name" >/dev/null 2>&1  # do not leave them for the next test
    exit 1
  fi
  sleep 0.5
done
echo "killed_driver: passed: nothing of cluster $name left after its driver was killed"
