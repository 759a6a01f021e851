#!/usr/bin/env bash
# Faults injected into running arcreduce jobs (docs/design/reliability.md, "Faults injected"): one
# scenario per call, around tests/faults/reduce_loop.cc (a deterministic SGD loop whose final
# line carries the parameters' hash and whether every rank holds the same one).
#
#   run_faults.sh SCENARIO SIM_CLUSTER_SCRIPT ARCRUN REDUCE_LOOP
#
#   stop_local   3 local ranks (mpirun, no cluster); rank 1 gets SIGSTOP and stays stopped: the
#                job must end by itself with an error naming rank 1 and a tensor, within the
#                stall timeout plus the liveness check, and leave no process behind.
#   stop_rank    the same on a simulated cluster of 4 hosts (rank 2, host 3).
#   kill_rank    for every compressor: rank 2 SIGKILLs itself as its next (compressed) bucket
#                starts, with the other ranks inside that bucket's collectives: the job must end
#                within the stall timeout with no process left on any host.
#   packet_loss  5% of the packets into host 2 dropped (iptables' statistic match in its
#                namespace; this kernel has no netem): the job completes with every replica
#                identical and equal to a loss-free run; the slowdown is printed.
#   link_flap    host 3's switch port down for FAULT_CUT_SECONDS (2) mid-job, then up again,
#                inside the stall timeout: the job completes, replicas equal to an uncut run.
#   resume       for every compressor (error feedback on the sparsifiers): a run that writes a
#                checkpoint at step 20 and is killed at step 30, resumed from that checkpoint,
#                ends bit-identical to a run that never crashed.
#
# Every job runs under `timeout`, so a hang fails the scenario instead of CTest's TIMEOUT; the
# cluster (named arcf<pid>, its own subnet) is removed and every rank this script started is
# gone on every exit path. Exit codes: 0 passed, 1 failed, 77 skipped (no namespaces, not root,
# no iptables, or no Open MPI for the cluster scenarios).
set -euo pipefail

(($# == 4)) || { echo "usage: run_faults.sh SCENARIO SIM_CLUSTER_SCRIPT ARCRUN REDUCE_LOOP" >&2; exit 2; }
scenario=$1
sim=$2
arcrun=$3
program=$(readlink -f "$4")
stall=${FAULT_STALL_SECONDS:-3}      # ARCREDUCE_STALL_SHUTDOWN_SECONDS of the fault jobs
cut_seconds=${FAULT_CUT_SECONDS:-2}  # link_flap
# kill_rank: how long after the stall timeout the job may take to end (the ranks' grace before
# MPI_Abort, mpirun's teardown of every host). Under a loaded machine (the suite at twice its
# parallelism) fp16's job once ended 3.63 s after the kill against the 3 s timeout; a missed
# detection runs into the job's 60 s limit instead.
teardown=${FAULT_TEARDOWN_SECONDS:-5}
compressors=(none fp16 topk randk arctopk oktopk powersgd)

log() { echo "faults[$scenario]: $*"; }
fail() {
  log "FAILED: $*"
  exit 1
}
skip() {
  log "skipped: $*"
  exit 77
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

work=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-faults.XXXXXX")
name=${FAULT_CLUSTER_NAME:-arcf$(($$ % 1000000))}
cluster=0
job_pid=""
# A driver killed with SIGKILL (CTest's TIMEOUT) runs no trap: a watcher in a session of its
# own, which a kill of this process or of its group does not reach, waits for this shell to end
# and then removes the cluster (namespaces, bridge, links, cgroups) and any rank left, however it
# ended. After a normal exit the trap below has done it already and the watcher finds nothing.
setsid bash -c '
  driver=$1 sim=$2 name=$3 work=$4 program=$5
  while kill -0 "$driver" 2>/dev/null; do sleep 0.5; done
  for pid in $(cat "$work"/*.out 2>/dev/null | awk "\$1 == \"rank\" && \$3 == \"pid\" { print \$4 }"); do
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$program" ]] && kill -9 "$pid" 2>/dev/null
  done
  bash "$sim" down --name "$name" --dir "$work/cluster" >/dev/null 2>&1
  rm -rf "$work"
' fault-watcher "$$" "$sim" "$name" "$work" "$program" </dev/null >/dev/null 2>&1 &
# The driver's own time limit, below CTest's TIMEOUT (tests/faults/CMakeLists.txt): past it the
# driver fails and cleans up through its trap, instead of being killed.
limit=${FAULT_DRIVER_SECONDS:-0}
if ((limit > 0)); then
  (sleep "$limit" && kill -TERM $$ 2>/dev/null) </dev/null >/dev/null 2>&1 &
  limit_pid=$!
fi
cleanup() {
  # A job still running here has failed its scenario: end it (mpirun forwards the signal), then
  # any rank this script started that is still alive (a stopped one included).
  if [[ -n "$job_pid" ]] && kill -0 "$job_pid" 2>/dev/null; then
    kill "$job_pid" 2>/dev/null || true
    sleep 1
  fi
  local pid
  for pid in $(rank_pids); do
    if is_ours "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
  done
  ((!cluster)) || bash "$sim" down --name "$name" --dir "$work/cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
  [[ -z "${limit_pid:-}" ]] || kill "$limit_pid" 2>/dev/null || true
}
trap cleanup EXIT
trap 'log "FAILED: stopped (signal or the driver time limit of ${limit:-0} s)"; exit 130' INT TERM

# Settings of every job (arcrun forwards every ARCREDUCE_* variable; local mpirun inherits them).
# No fusion: a fused bucket depends on timing, and a tensor's sums on its bucket, so only
# unfused runs are bit-for-bit reproducible across runs (the comparisons below need that).
export ARCREDUCE_FUSION_THRESHOLD=0
# The comparisons are between independent runs, and ARCREDUCE_AUTO_COMPRESS decides by timing
# in each: each compressor runs as named (the choice's resume is CompressionChoice.* 's test).
export ARCREDUCE_AUTO_COMPRESS=0
export ARCREDUCE_STALL_CHECK_SECONDS=$stall
export ARCREDUCE_STALL_SHUTDOWN_SECONDS=$stall
export ARCREDUCE_LOG_LEVEL=warning

if ! mpirun --version 2>/dev/null | grep -qE 'Open MPI|OpenRTE'; then
  skip "needs Open MPI's mpirun on PATH (the cluster's rsh agent and these flags are Open MPI's)"
fi

# ---- jobs ---------------------------------------------------------------------------------------

cluster_up() {
  local rc=0
  # FAULT_CPUS: a CPU budget per host (cgroups), for the test that kills this driver.
  bash "$sim" up 4 --rate "$1" ${FAULT_CPUS:+--cpus "$FAULT_CPUS"} --name "$name" \
    --dir "$work/cluster" >"$work/up.log" 2>&1 || rc=$?
  ((rc != 77)) || skip "the simulated cluster cannot run here: $(tail -1 "$work/up.log")"
  ((rc == 0)) || fail "could not bring the cluster up (exit $rc): $(cat "$work/up.log")"
  cluster=1
  # shellcheck disable=SC1091  # written by `sim-cluster.sh up`
  source "$work/cluster/cluster.env"
}

# start_job OUT TIMEOUT ARGS...: the reduce loop on the cluster (or 3 local ranks for
# stop_local) in the background; job_pid is its arcrun/mpirun.
start_job() {
  local out=$1 limit=$2
  shift 2
  local -a cmd
  if ((cluster)); then
    # shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
    cmd=("$arcrun" -np 4 --hostfile "$hostfile" --rsh-agent "$rsh_agent"
         --network-interface "$network" --mpi-args "$mpi_args" -- "$program" "$@")
  else
    cmd=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
         mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none
         -np 3 "$program" "$@")
  fi
  # --verbose: timeout says when it fires. Its exit status alone cannot tell a hang from a rank
  # killed by SIGKILL: mpirun exits 137 for the latter, as timeout does after its own KILL.
  timeout --verbose -k 5 "$limit" "${cmd[@]}" >"$out" 2>&1 &
  job_pid=$!
  job_out=$out
}

# wait_job: waits for the background job; sets job_rc, and job_rc to 124 when the job ran past
# its timeout.
wait_job() {
  job_rc=0
  wait "$job_pid" || job_rc=$?
  job_pid=""
  if grep -q '^timeout: sending signal' "$job_out"; then
    job_rc=124
  elif ((job_rc == 124)); then
    job_rc=1  # the job's own status 124, not a timeout
  fi
}

# run_job OUT TIMEOUT ARGS...: start_job, then wait_job.
run_job() {
  start_job "$@"
  wait_job
}

# The processes of the ranks of every job run so far ("rank R pid P" lines).
rank_pids() {
  cat "$work"/*.out 2>/dev/null | awk '$1 == "rank" && $3 == "pid" { print $4 }' | sort -u
}
# Whether $1 is still a process of our reduce loop (not a reused pid).
is_ours() {
  [[ "$(readlink "/proc/$1/exe" 2>/dev/null)" == "$program" ]]
}
rank_pid() { awk -v r="$2" '$1 == "rank" && $2 == r && $3 == "pid" { print $4; exit }' "$1"; }

# Fails unless every rank of every job and every process on the cluster's hosts is gone (within
# 5 s of the job's end: mpirun's teardown is asynchronous).
check_no_orphans() {
  local deadline left pid ns
  deadline=$(($(date +%s) + 5))
  while true; do
    left=""
    for pid in $(rank_pids); do
      ! is_ours "$pid" || left+=" rank process $pid"
    done
    if ((cluster)); then
      for ((i = 1; i <= 4; i++)); do
        ns="$name-h$i"
        pid=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        [[ -z "$pid" ]] || left+=" $ns: $pid"
      done
    fi
    [[ -n "$left" ]] || return 0
    (($(date +%s) < deadline)) || fail "processes left after the job ended:$left"
    sleep 0.2
  done
}

# wait_for_line FILE REGEX SECONDS: until the running job prints a matching line.
wait_for_line() {
  local deadline=$(($(date +%s) + $3))
  until grep -qE "$2" "$1" 2>/dev/null; do
    kill -0 "$job_pid" 2>/dev/null || { cat "$1"; fail "the job ended before printing /$2/"; }
    (($(date +%s) < deadline)) || { cat "$1"; fail "no line /$2/ within $3 s"; }
    sleep 0.05
  done
}

# final_field OUT KEY: a key=value of the job's "final:" line.
final_field() {
  grep -m1 '^final:' "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k { print $2 }'
}

# expect_success OUT WHAT: the job exited 0 and its replicas are identical.
expect_success() {
  ((job_rc != 124)) || { cat "$1"; fail "$2: the job hung (ran into its timeout)"; }
  ((job_rc == 0)) || { cat "$1"; fail "$2: the job exited $job_rc"; }
  [[ "$(final_field "$1" replicas)" == identical ]] || { cat "$1"; fail "$2: replicas differ"; }
}

# ---- scenarios ----------------------------------------------------------------------------------

# The job ends by itself after one rank is stopped: an error naming that rank and a tensor, the
# time from the stop to the first error and to the end of the job, no process left.
scenario_stop() {
  local victim=$1 width=$2 out="$work/stop.out"
  start_job "$out" 120 --steps 100000000 --width "$width" --progress-every 10
  wait_for_line "$out" '^step 30 ' 60
  local pid
  pid=$(rank_pid "$out" "$victim")
  { [[ -n "$pid" ]] && is_ours "$pid"; } || fail "no process for rank $victim"
  local t_stop t_end
  t_stop=$(now)
  kill -STOP "$pid"
  log "rank $victim (pid $pid) stopped with SIGSTOP; stall timeout $stall s"
  wait_job
  t_end=$(now)
  cat "$out"
  ((job_rc != 124)) || fail "the job hung: still running 120 s after it started"
  ((job_rc != 0)) || fail "the job exited 0 although rank $victim was stopped"
  # Every other rank's op fails with the stall error, which names the stopped rank and a tensor.
  local r first="" at
  for ((r = 0; r < ${3}; r++)); do
    ((r != victim)) || continue
    local line
    line=$(grep -m1 -E "^reduce_loop: rank $r: step [0-9]+: tensor 'fault/[a-z0-9]+' failed" "$out" || true)
    [[ -n "$line" ]] || fail "rank $r printed no failed op"
    grep -qiE 'stall' <<<"$line" || fail "rank $r: not a stall error: $line"
    # The runtime's message (after the program's own prefix) names the rank and a tensor.
    grep -qE "\branks? ([0-9]+, )*$victim(, [0-9]+)* did not answer" <<<"$line" ||
      fail "rank $r: the error does not name rank $victim: $line"
    grep -qE "'fault/" <<<"${line#*failed after}" || fail "rank $r: the error names no tensor: $line"
    at=$(sed -E 's/.*\(at=([0-9.]+)\).*/\1/' <<<"$line")
    if [[ -z "$first" ]] || awk -v a="$at" -v b="$first" 'BEGIN { exit !(a < b) }'; then
      first=$at
    fi
  done
  check_no_orphans
  log "passed: first error $(elapsed "$t_stop" "$first") s and job end $(elapsed "$t_stop" "$t_end") s" \
    "after the stop (stall timeout $stall s); every other rank failed with a stall error naming" \
    "rank $victim and a tensor; no process left"
}

scenario_kill_rank() {
  cluster_up 1gbit
  local c out t_kill t_end summary=""
  for c in "${compressors[@]}"; do
    out="$work/kill-$c.out"
    run_job "$out" 60 --steps 40 --compressor "$c" --kill-rank 2 --kill-at-step 10
    t_end=$(now)
    ((job_rc != 124)) || { cat "$out"; fail "$c: the job hung after rank 2 was killed"; }
    ((job_rc != 0)) || { cat "$out"; fail "$c: the job exited 0 although rank 2 was killed"; }
    t_kill=$(sed -nE 's/^reduce_loop: rank 2: SIGKILL at step 10 at=([0-9.]+)$/\1/p' "$out")
    [[ -n "$t_kill" ]] || { cat "$out"; fail "$c: rank 2 did not reach its kill"; }
    local detect errors
    detect=$(elapsed "$t_kill" "$t_end")
    awk -v d="$detect" -v s="$stall" -v t="$teardown" 'BEGIN { exit !(d <= s + t) }' || {
      cat "$out"
      fail "$c: the job ended $detect s after the kill, above the stall timeout ($stall s) and" \
        "the teardown's allowance ($teardown s)"
    }
    check_no_orphans
    # How the others ended: their own error (the runtime saw the broken connection) or
    # mpirun's teardown (it noticed the dead rank first).
    errors=$(grep -cE "^reduce_loop: rank [013]: .* failed" "$out" || true)
    summary+=" $c=${detect}s(errors:$errors)"
    log "$c: job ended ${detect} s after rank 2's SIGKILL (exit $job_rc, $errors ranks reported an error), no process left"
  done
  log "passed:$summary"
}

scenario_packet_loss() {
  cluster_up 1gbit
  command -v iptables >/dev/null || skip "needs iptables (Debian: iptables) for the statistic match"
  local host="$name-h2"
  ip netns exec "$host" iptables -A INPUT -m statistic --mode random --probability 0 -j DROP 2>"$work/ipt.err" ||
    skip "iptables' statistic match unavailable in a namespace: $(cat "$work/ipt.err")"
  ip netns exec "$host" iptables -F INPUT
  local c summary="" base lossy
  for c in arctopk none; do
    base="$work/loss-base-$c.out"
    lossy="$work/loss-$c.out"
    run_job "$base" 120 --steps 200 --compressor "$c"
    expect_success "$base" "$c without loss"
    ip netns exec "$host" iptables -A INPUT -m statistic --mode random --probability 0.05 -j DROP
    # A dropped segment waits for TCP's retransmission (200 ms at least, doubling when the
    # retransmission is lost too): the stall timeout is raised so that only a hang fails.
    ARCREDUCE_STALL_SHUTDOWN_SECONDS=60 ARCREDUCE_STALL_CHECK_SECONDS=30 run_job "$lossy" 200 --steps 200 --compressor "$c"
    local dropped
    dropped=$(ip netns exec "$host" iptables -L INPUT -v -x -n | awk '$3 == "DROP" { print $1; exit }')
    ip netns exec "$host" iptables -F INPUT
    expect_success "$lossy" "$c with 5% loss into $host"
    [[ "$(final_field "$lossy" hash)" == "$(final_field "$base" hash)" ]] ||
      fail "$c: parameters after the lossy run differ from the loss-free run's"
    ((dropped > 0)) || fail "$c: iptables dropped no packet into $host"
    local t0 t1
    t0=$(final_field "$base" seconds)
    t1=$(final_field "$lossy" seconds)
    log "$c: 200 steps in $t0 s without loss, $t1 s with 5% loss into $host" \
      "($(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.2f", a / b }')x, $dropped packets dropped);" \
      "replicas identical, hash $(final_field "$lossy" hash) equal to the loss-free run's"
    summary+=" $c=$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.2f", a / b }')x"
  done
  log "passed: slowdown$summary"
}

scenario_link_flap() {
  cluster_up 1gbit
  local port="${name}v3" base="$work/flap-base.out" out="$work/flap.out"
  export ARCREDUCE_STALL_SHUTDOWN_SECONDS=$((cut_seconds * 4)) ARCREDUCE_STALL_CHECK_SECONDS=$((cut_seconds * 4))
  run_job "$base" 120 --steps 400 --compressor arctopk --progress-every 10
  expect_success "$base" "uncut run"
  start_job "$out" 120 --steps 400 --compressor arctopk --progress-every 10
  wait_for_line "$out" '^step 100 ' 60
  local t_cut t_up before after
  before=$(grep -cE '^step ' "$out")
  t_cut=$(now)
  ip link set "$port" down
  sleep "$cut_seconds"
  after=$(grep -cE '^step ' "$out")
  ip link set "$port" up
  t_up=$(now)
  wait_job
  expect_success "$out" "run with host 3's link cut for $cut_seconds s"
  [[ "$(final_field "$out" hash)" == "$(final_field "$base" hash)" ]] ||
    fail "parameters after the cut differ from the uncut run's"
  ((after - before <= 1)) || fail "the job advanced $((after - before)) progress lines while the link was down: the cut did not hit it"
  log "passed: link of $name-h3 down for $(elapsed "$t_cut" "$t_up") s (stall timeout" \
    "$ARCREDUCE_STALL_SHUTDOWN_SECONDS s); 400 steps in $(final_field "$out" seconds) s against" \
    "$(final_field "$base" seconds) s uncut; replicas identical and equal to the uncut run"
}

scenario_resume() {
  cluster_up 1gbit
  local c ef straight crashed resumed summary=""
  for c in "${compressors[@]}"; do
    case $c in
      topk) ef=ef14 ;;
      randk) ef=ef21m ;;
      arctopk) ef=ef21 ;;
      *) ef=none ;;
    esac
    straight="$work/resume-straight-$c.out"
    crashed="$work/resume-crashed-$c.out"
    resumed="$work/resume-resumed-$c.out"
    export ARCREDUCE_ERROR_FEEDBACK=$ef
    run_job "$straight" 60 --steps 40 --compressor "$c"
    expect_success "$straight" "$c straight"
    run_job "$crashed" 60 --steps 40 --compressor "$c" --checkpoint "$work/ckpt-$c" \
      --checkpoint-at 20 --kill-rank 1 --kill-at-step 30
    ((job_rc != 0 && job_rc != 124)) ||
      { cat "$crashed"; fail "$c: the crashed run exited $job_rc"; }
    grep -q '^checkpoint: step 20$' "$crashed" || { cat "$crashed"; fail "$c: no checkpoint at step 20"; }
    check_no_orphans
    run_job "$resumed" 60 --steps 40 --compressor "$c" --resume "$work/ckpt-$c"
    expect_success "$resumed" "$c resumed"
    grep -q '^resumed: from step 20$' "$resumed" || { cat "$resumed"; fail "$c: did not resume from step 20"; }
    [[ "$(final_field "$resumed" hash)" == "$(final_field "$straight" hash)" ]] ||
      fail "$c ($ef): resumed run ends at $(final_field "$resumed" hash), the straight run at $(final_field "$straight" hash)"
    log "$c (error feedback $ef): crashed at step 30, resumed from step 20: hash $(final_field "$resumed" hash), equal to the run that never crashed"
    summary+=" $c"
  done
  unset ARCREDUCE_ERROR_FEEDBACK
  log "passed: bit-identical after crash and resume for$summary"
}

start=$(now)
case $scenario in
  stop_local) scenario_stop 1 64 3 ;;
  stop_rank)
    cluster_up 1gbit
    scenario_stop 2 256 4
    ;;
  kill_rank) scenario_kill_rank ;;
  packet_loss) scenario_packet_loss ;;
  link_flap) scenario_link_flap ;;
  resume) scenario_resume ;;
  *) echo "run_faults.sh: unknown scenario '$scenario'" >&2; exit 2 ;;
esac
log "took $(elapsed "$start" "$(now)") s"
