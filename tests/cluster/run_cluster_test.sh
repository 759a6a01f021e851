#!/usr/bin/env bash
# End-to-end test of arcrun on a simulated cluster (scripts/sim-cluster.sh): brings up 4 hosts,
# runs a 4-rank allreduce_hosts job through `arcrun --hostfile ... --rsh-agent ...` with MPI over
# TCP between the hosts, checks every rank's result and host name, and removes the cluster.
#
#   run_cluster_test.sh SIM_CLUSTER_SCRIPT ARCRUN ALLREDUCE_HOSTS
#
# Exit codes: 0 passed; 1 failed; 77 skipped (the machine cannot host the cluster: not root, no
# network namespaces, ...). The cluster is named after this process, so concurrent runs do not
# collide, and is removed on every exit path this script sees (the job runs under `timeout`, so
# a hung job still ends before CTest's TIMEOUT would kill this script).
set -euo pipefail

(($# == 3)) || { echo "usage: run_cluster_test.sh SIM_CLUSTER_SCRIPT ARCRUN PROGRAM" >&2; exit 2; }
sim=$1
arcrun=$2
program=$3
hosts=4
job_timeout_s=${CLUSTER_TEST_JOB_TIMEOUT:-90}

# --rsh-agent is Open MPI's plm_rsh_agent; arcrun refuses it with MPICH.
if ! mpirun --version 2>/dev/null | grep -qE 'Open MPI|OpenRTE'; then
  echo "cluster test: skipped, needs Open MPI's mpirun on PATH"
  exit 77
fi

name=arct$(($$ % 1000000))
dir=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-cluster-test.XXXXXX")
cleanup() {
  bash "$sim" down --name "$name" --dir "$dir/cluster" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rc=0
bash "$sim" up "$hosts" --rate 1gbit --name "$name" --dir "$dir/cluster" || rc=$?
if ((rc == 77)); then
  echo "cluster test: skipped, the simulated cluster cannot run here"
  exit 77
fi
((rc == 0)) || { echo "cluster test: FAILED to bring the cluster up (exit $rc)"; exit 1; }
# shellcheck disable=SC1091  # written by `sim-cluster.sh up`
source "$dir/cluster/cluster.env"

# shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
cmd=("$arcrun" -np "$hosts" --hostfile "$hostfile" --rsh-agent "$rsh_agent"
     --network-interface "$network" --mpi-args "$mpi_args" --verbose -- "$program")
printf '$'
printf ' %q' "${cmd[@]}"
echo
rc=0
output=$(timeout -k 10 "$job_timeout_s" "${cmd[@]}" 2>&1) || rc=$?
echo "$output"
((rc != 124 && rc != 137)) || { echo "cluster test: FAILED, the job ran past ${job_timeout_s}s"; exit 1; }
((rc == 0)) || { echo "cluster test: FAILED, the job exited $rc"; exit 1; }

# --map-by slot with one slot per host: rank r runs on the hostfile's (r+1)-th host.
failed=0
for ((r = 0; r < hosts; r++)); do
  want="rank $r of $hosts host $name-h$((r + 1)) result ok"
  if ! grep -qxF "$want" <<<"$output"; then
    echo "cluster test: FAILED, no line '$want'"
    failed=1
  fi
done
((!failed)) || exit 1
echo "cluster test: passed ($hosts ranks on $hosts simulated hosts, results and host names right)"
