#!/usr/bin/env bash
# CPU budgets of the simulated cluster (scripts/sim-cluster.sh up --cpus): brings up 2 hosts of
# 0.25 CPUs each, runs a 1.5 s busy loop on host 1 through the rsh agent, and checks from the
# hosts' cgroup accounting that the loop ran in host 1's group, used at most about a quarter of a
# core (below 0.4) and was throttled, that host 2's group stayed idle, that `status` shows the
# budget, and that `down` removes the groups.
#
#   run_cpu_budget_test.sh SIM_CLUSTER_SCRIPT
#
# Exit codes: 0 passed; 1 failed; 77 skipped (the machine cannot host the cluster or has no CFS
# quotas, or it is so busy that the loop got well under its budget without being throttled, so
# the budget was not what held it). The cluster is named after this process, so concurrent runs
# do not collide, and is removed on every exit path this script sees.
set -euo pipefail

(($# == 1)) || { echo "usage: run_cpu_budget_test.sh SIM_CLUSTER_SCRIPT" >&2; exit 2; }
sim=$1
budget=0.25
max_cores=0.4     # the budget plus generous room for rounding and the agent's start
loop_s=1.5

name=arcc$(($$ % 1000000))
dir=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-cpu-budget-test.XXXXXX")
cleanup() {
  bash "$sim" down --name "$name" --dir "$dir/cluster" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "cpu budget test: FAILED, $*"
  exit 1
}

rc=0
bash "$sim" up 2 --rate 1gbit --cpus "$budget" --name "$name" --dir "$dir/cluster" || rc=$?
if ((rc == 77)); then
  echo "cpu budget test: skipped, the simulated cluster (with CPU budgets) cannot run here"
  exit 77
fi
((rc == 0)) || fail "could not bring the cluster up (exit $rc)"
# shellcheck disable=SC1091  # written by `sim-cluster.sh up`
source "$dir/cluster/cluster.env"
# shellcheck disable=SC2154  # cpus, cgroup: from cluster.env
[[ "$cpus" == "$budget" && -d "$cgroup/$name-h1" && -d "$cgroup/$name-h2" ]] ||
  fail "cluster.env names no budget or groups (cpus '$cpus', cgroup '$cgroup')"

# CPU time of host $1's group in ns, from the cgroup's own accounting.
# shellcheck disable=SC2154  # cgroup_version, cpuacct: from cluster.env
usage_ns() {
  if [[ "$cgroup_version" == 2 ]]; then
    awk '$1 == "usage_usec" {print $2 * 1000}' "$cgroup/$1/cpu.stat"
  elif [[ -n "$cpuacct" ]]; then
    cat "$cpuacct/$1/cpuacct.usage"
  else
    cat "$cgroup/$1/cpuacct.usage"
  fi
}
throttled() { awk '$1 == "nr_throttled" {print $2}' "$cgroup/$1/cpu.stat"; }
if [[ -z "$(usage_ns "$name-h1" 2>/dev/null)" ]]; then
  echo "cpu budget test: skipped, no CPU accounting for the hosts' groups (cpuacct not mounted)"
  exit 77
fi

h1_used0=$(usage_ns "$name-h1")
h2_used0=$(usage_ns "$name-h2")
throttled0=$(throttled "$name-h1")
start_ns=$(date +%s%N)
rc=0
# shellcheck disable=SC2154  # rsh_agent: from cluster.env
output=$("$rsh_agent" "$name-h1" \
  "cat /proc/self/cgroup; timeout $loop_s sh -c 'while :; do :; done'; [ \$? -eq 124 ]") || rc=$?
end_ns=$(date +%s%N)
((rc == 0)) || fail "the busy loop through the rsh agent exited $rc: $output"
grep -q "/arcreduce-sim-$name/$name-h1\$" <<<"$output" ||
  fail "the loop did not run in host 1's group; its /proc/self/cgroup: $output"

read -r cores used_s wall_s h2_s < <(awk -v u0="$h1_used0" -v u1="$(usage_ns "$name-h1")" \
  -v v0="$h2_used0" -v v1="$(usage_ns "$name-h2")" -v t0="$start_ns" -v t1="$end_ns" \
  'BEGIN { printf "%.3f %.3f %.3f %.3f\n", (u1 - u0) / (t1 - t0), (u1 - u0) / 1e9,
           (t1 - t0) / 1e9, (v1 - v0) / 1e9 }')
throttled_periods=$(($(throttled "$name-h1") - throttled0))
echo "cpu budget test: host 1 used $used_s s of CPU in $wall_s s: $cores of a core" \
  "(budget $budget, ${cpu_quota_us:-?} us per ${cpu_period_us:-?} us), throttled in" \
  "$throttled_periods periods; host 2 used $h2_s s"

awk -v c="$cores" -v m="$max_cores" 'BEGIN { exit !(c < m) }' ||
  fail "host 1 used $cores of a core, not below $max_cores (budget $budget)"
if ((throttled_periods == 0)); then
  if awk -v c="$cores" -v b="$budget" 'BEGIN { exit !(c < b / 2) }'; then
    echo "cpu budget test: skipped, the machine gave the loop only $cores of a core, under its" \
      "budget, so the quota never came into play"
    exit 77
  fi
  fail "host 1's group was never throttled, at $cores of a core"
fi
awk -v c="$cores" 'BEGIN { exit !(c > 0.02) }' ||
  fail "host 1's group counted almost no CPU time ($cores of a core)"
awk -v s="$h2_s" 'BEGIN { exit !(s < 0.05) }' ||
  fail "host 2's group, idle, counted $h2_s s of CPU time"

status=$(bash "$sim" status --name "$name" --dir "$dir/cluster")
grep -q "^$name-h1: .*, cpu $budget (" <<<"$status" ||
  fail "status shows no budget for host 1: $status"

bash "$sim" down --name "$name" --dir "$dir/cluster" >/dev/null
for folder in "$cgroup" ${cpuacct:+"$cpuacct"}; do
  [[ ! -e "$folder" ]] || fail "down left the cgroup folder $folder"
done
echo "cpu budget test: passed (the budget held, was enforced by throttling, and down removed the" \
  "groups)"
