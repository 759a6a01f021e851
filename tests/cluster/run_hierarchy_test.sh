#!/usr/bin/env bash
# Several ranks per host on a simulated cluster (scripts/sim-cluster.sh --slots): the
# hierarchical All-Reduce (ARCREDUCE_HIERARCHICAL,
# docs/design/communicators-several-ranks-per-host.md) through arcrun,
#   2 hosts x 2 ranks   allreduce_hosts (exact sums, the runtime's view of the hosts, Stats say
#                       hierarchical), the same flat (ARCREDUCE_HIERARCHICAL=0), every compressor
#                       and dtype (compressors_invariants_test: replicas bit-identical, ratio 1
#                       equal to the dense mean) under auto and with every All-Reduce by host
#                       (ARCREDUCE_HIERARCHICAL=1), and a rank killed on host 1 beside its host's
#                       first rank, which must end the job with a non-zero exit in bounded time;
#   uneven hosts        3 ranks on 2 hosts of 2 slots (2 + 1): allreduce_hosts and the
#                       compressors;
#   2 hosts x 4 ranks   allreduce_hosts and the compressors.
#
#   run_hierarchy_test.sh SIM_CLUSTER_SCRIPT ARCRUN ALLREDUCE_HOSTS INVARIANTS KILL EXPECT_JOB
#
# Exit codes: 0 passed; 1 failed; 77 skipped (the machine cannot host the cluster). Clusters are
# named after this process and removed on every exit path.
set -euo pipefail

(($# == 6)) || {
  echo "usage: run_hierarchy_test.sh SIM ARCRUN ALLREDUCE_HOSTS INVARIANTS KILL EXPECT_JOB" >&2
  exit 2
}
sim=$1 arcrun=$2 allreduce_hosts=$3 invariants=$4 kill_test=$5 expect_job=$6
job_timeout_s=${CLUSTER_TEST_JOB_TIMEOUT:-150}

if ! mpirun --version 2>/dev/null | grep -qE 'Open MPI|OpenRTE'; then
  echo "hierarchy test: skipped, needs Open MPI's mpirun on PATH"
  exit 77
fi

name=arch$(($$ % 1000000))
dir=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-hierarchy-test.XXXXXX")
cleanup() {
  bash "$sim" down --name "$name" --dir "$dir/cluster" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# As tests/mpi/compressors.cmake runs the compressors: consistency checks on, a hang turned into
# a stall abort, short Ok-Topk periods, PowerSGD at rank 2.
compressor_env=(-x ARCREDUCE_CHECK_CONSISTENCY=1 -x ARCREDUCE_STALL_CHECK_SECONDS=5
  -x ARCREDUCE_STALL_SHUTDOWN_SECONDS=40 -x ARCREDUCE_OKTOPK_TAU=2 -x ARCREDUCE_OKTOPK_TAU_PRIME=3
  -x ARCREDUCE_POWERSGD_RANK=2)

up() {  # slots
  local rc=0
  bash "$sim" up 2 --rate 1gbit --slots "$1" --name "$name" --dir "$dir/cluster" || rc=$?
  if ((rc == 77)); then
    echo "hierarchy test: skipped, the simulated cluster cannot run here"
    exit 77
  fi
  ((rc == 0)) || { echo "hierarchy test: FAILED to bring the cluster up (exit $rc)"; exit 1; }
  # shellcheck disable=SC1091  # written by `sim-cluster.sh up`
  source "$dir/cluster/cluster.env"
}

job() {  # np words... -- program args...: runs it, prints it and its output, fails on non-zero
  local np=$1
  shift
  # shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
  local cmd=("$arcrun" -np "$np" --hostfile "$hostfile" --rsh-agent "$rsh_agent"
    --network-interface "$network" --mpi-args "$mpi_args" "$@")
  printf '$'
  printf ' %q' "${cmd[@]}"
  echo
  local rc=0
  output=$(timeout -k 10 "$job_timeout_s" "${cmd[@]}" 2>&1) || rc=$?
  echo "$output"
  ((rc == 0)) || { echo "hierarchy test: FAILED, the job exited $rc"; exit 1; }
}

sums_ok() {  # np: every rank's allreduce_hosts line says ok
  local r
  for ((r = 0; r < $1; r++)); do
    grep -qE "^rank $r of $1 host .* result ok$" <<<"$output" ||
      { echo "hierarchy test: FAILED, rank $r's result is not ok"; exit 1; }
  done
}

up 2
job 4 -- "$allreduce_hosts" --ranks-per-host=2
sums_ok 4
job 4 -x ARCREDUCE_HIERARCHICAL=0 -- "$allreduce_hosts" --ranks-per-host=2
sums_ok 4
job 3 -- "$allreduce_hosts" --ranks-per-host=2
sums_ok 3
# auto sends by host what the ring carries between hosts (the dense buckets here); =1 sends
# every All-Reduce by host, the compressors' sketches, rows and factors too.
job 4 "${compressor_env[@]}" -- "$invariants"
job 4 "${compressor_env[@]}" -x ARCREDUCE_HIERARCHICAL=1 -- "$invariants"
job 3 "${compressor_env[@]}" -x ARCREDUCE_HIERARCHICAL=1 -- "$invariants"
# Rank 1 shares host 1 with rank 0, the host's first rank, which waits for it in the host's
# reduction: the job must still end, with the killed rank's message, within the stall limit.
# shellcheck disable=SC2154
bash "$expect_job" --exit nonzero --within 120 --expect "killing myself" --reject "TEST-ERROR" \
  -- "$arcrun" -np 4 --hostfile "$hostfile" --rsh-agent "$rsh_agent" \
  --network-interface "$network" --mpi-args "$mpi_args" -x ARCREDUCE_STALL_CHECK_SECONDS=2 \
  -x ARCREDUCE_STALL_SHUTDOWN_SECONDS=20 -- "$kill_test" --victim=1 ||
  { echo "hierarchy test: FAILED, the killed rank's job"; exit 1; }
bash "$sim" down --name "$name" --dir "$dir/cluster" >/dev/null

up 4
job 8 -- "$allreduce_hosts" --ranks-per-host=4
sums_ok 8
job 8 "${compressor_env[@]}" -x ARCREDUCE_HIERARCHICAL=1 -- "$invariants"
echo "hierarchy test: passed (2 hosts x 2 and x 4 ranks, uneven hosts, flat and hierarchical," \
  "every compressor, a killed rank)"
