#!/usr/bin/env bash
# End-to-end training-step benchmark (docs/benchmarks.md, "End-to-end training step"): times
# real training steps (forward, backward, gradient exchange, optimizer) of
#   cpp-mlp    examples/03_fashion_mnist's MLP (train_fashion_mnist --step-bench), beside a
#              PyTorch twin of it under DDP (bench/e2e/torch_step_bench.py --model fmnist-mlp)
#   torch-mlp  a 4.2M-parameter PyTorch MLP (bench/e2e/torch_step_bench.py --model mlp4m)
# for the variants floor (no communication), dense and arctopk (arcreduce at its defaults), paper
# (ARCREDUCE_PRESET=paper, timed past its dense warm-up), topk (All-Gather Top-K at 1%; the C++
# example only), ddp and ddp-powersgd (PyTorch DDP over gloo), and torch-floor (cpp-mlp: the
# PyTorch twin without communication), in every setting: 1 host (a local launch of $LOCAL_RANKS
# ranks) and, for each host count above 1, a simulated cluster (scripts/sim-cluster.sh, one rank
# per host, each host held to a CPU budget of its own: CPUS) at each rate, PASSES times. Prints every
# command and its raw output; writes OUT_DIR/results.jsonl (one JSON line per run), meta.json,
# raw.txt, then table.md and step-time.png (bench/e2e/make_report.py).
#
#   bash scripts/bench-e2e.sh
#   HOSTS="1 2" RATES=1gbit WORKLOADS=torch-mlp VARIANTS="dense ddp" STEPS=10 \
#     bash scripts/bench-e2e.sh
#
# Environment: HOSTS ("1 2 4"), RATES ("100mbit 1gbit"), WORKLOADS ("cpp-mlp torch-mlp"),
# VARIANTS ("floor dense arctopk torch-floor ddp ddp-powersgd"; also paper, topk, for the C++
# example randk, oktopk and powersgd, as bench-tta.sh's, and for torch-mlp ddp-hook and
# ddp-hook-dense: DDP with arcreduce's communication hook, ARC-Top-K and none), STEPS (40 timed
# steps at most), CPUS (each simulated host's CPU budget in cores; "auto", the default, gives the
# hosts 0.9 of the machine's cores between them, e.g. 0.22 each for 8 hosts on 2 cores; 0: no
# budget, the hosts share the cores), CPU_PERIOD (the budget's CFS period in us; empty:
# sim-cluster's choice), PASSES (1: how often each setting's variants run, in turn), WARMUP (5;
# ARC_WARMUP, 30, for the arctopk rows, past the runtime's batching trial), BUDGET (20: seconds of
# timed steps a run aims at; fewer steps, at least 10, when the warm-up says STEPS would take
# longer; 0 always times STEPS), LOCAL_RANKS (2), RUN_TIMEOUT (300 s per run), BUILD_DIR (build/), OUT_DIR (docs/results/e2e), PYTHON (/usr/bin/python3,
# Debian's, which has torch and matplotlib), DATA_DIR (Debian's dataset-fashion-mnist).
# Cluster settings need root and network namespaces; where sim-cluster.sh cannot build one (77)
# they are skipped with a message. Exit status: 0 done (failed runs are rows marked failed),
# 1 a build or report failure, 77 nothing could run.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
out_dir=${OUT_DIR:-$root/docs/results/e2e}
host_counts=${HOSTS:-1 2 4}
rates=${RATES:-100mbit 1gbit}
workloads=${WORKLOADS:-cpp-mlp torch-mlp}
variants=${VARIANTS:-floor dense arctopk torch-floor ddp ddp-powersgd}
steps=${STEPS:-40}
warmup=${WARMUP:-5}
arc_warmup=${ARC_WARMUP:-30}
budget=${BUDGET:-20}
local_ranks=${LOCAL_RANKS:-2}
host_cpus=${CPUS:-auto}  # not `cpus`: cluster.env, sourced below, sets that
passes=${PASSES:-1}
cpu_period=${CPU_PERIOD:-}  # sim-cluster.sh's --cpu-period (its default when empty)
run_timeout=${RUN_TIMEOUT:-300}
python=${PYTHON:-/usr/bin/python3}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers forbid cross-memory attach
# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"

if [[ ! -r "$data_dir/train-images-idx3-ubyte.gz" && ! -r "$data_dir/train-images-idx3-ubyte" ]]
then
  echo "bench-e2e: no Fashion-MNIST in $data_dir (apt-get install dataset-fashion-mnist)" >&2
  exit 77
fi
with_torch=1
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "bench-e2e: $python has no torch: PyTorch runs skipped (apt-get install python3-torch)" >&2
  with_torch=0
fi

targets=(arcrun train_fashion_mnist)
if cmake --build "$build_dir" --target help 2>/dev/null | grep -qw arcreduce_torch; then
  targets+=(arcreduce_torch)
fi
bench_build "$build_dir" "${targets[@]}" || exit 1
if [[ "$with_torch" == 1 && ! -d "$build_dir/python/arcreduce/torch" ]]; then
  echo "bench-e2e: no arcreduce.torch in $build_dir/python: its PyTorch runs will fail" >&2
fi
commit=$(bench_commit "$root")
bench_scratch "$root" arce e2e

mkdir -p "$out_dir"
: >"$out_dir/results.jsonl"
exec > >(tee "$out_dir/raw.txt") 2>&1
"$python" "$root/bench/e2e/make_report.py" meta "$out_dir" --commit "$commit" --steps "$steps" \
  --warmup "$warmup" --arc-warmup "$arc_warmup" --budget "$budget" --local-ranks "$local_ranks" \
  --python "$python"
echo "bench-e2e $(date -u '+%Y-%m-%d %H:%M UTC') commit $commit, $(nproc) CPUs"

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# One run: prints the command and its output, appends its JSON line (tagged with the setting)
# to results.jsonl, or a "failed" line with the exit status.
run_one() {  # workload variant -- launch words...
  local workload=$1 variant=$2
  shift 3
  local -a program
  # The runtime decides whether to hold compressed tensors to one cycle by timing steps 4-27
  # (ARCREDUCE_BATCH_COMPRESSED=auto): ARC-Top-K rows are timed after that trial.
  local warm=$warmup
  if [[ $variant == arctopk || $variant == paper || $variant == topk || $variant == ddp-hook ]] &&
     ((warm < arc_warmup)); then warm=$arc_warmup; fi
  local bench_flags=(--steps "$steps" --warmup "$warm" --budget "$budget")
  case "$workload:$variant" in
    cpp-mlp:floor | cpp-mlp:dense | cpp-mlp:arctopk | cpp-mlp:topk | cpp-mlp:paper | cpp-mlp:randk \
    | cpp-mlp:oktopk | cpp-mlp:powersgd)
      program=("$build_dir/examples/03_fashion_mnist/train_fashion_mnist" --step-bench "$steps"
               --step-bench-warmup "$warm" --step-bench-budget "$budget" --data-dir "$data_dir"
               --train-samples 16384 --test-samples 1)
      case $variant in
        floor) program+=(--no-communication) ;;
        dense) program+=(--compressor dense) ;;
        arctopk) program+=(--compressor arctopk --compress-ratio 0.01) ;;
        topk) program+=(--compressor topk --compress-ratio 0.01) ;;
        randk) program+=(--compressor randk --error-feedback ef14) ;;
        oktopk) program+=(--compressor oktopk) ;;
        powersgd) program+=(--compressor powersgd) ;;
        paper) ;;  # the preset's compressor and ratio (the example reads the environment)
      esac
      ;;
    cpp-mlp:torch-floor | cpp-mlp:ddp | cpp-mlp:ddp-powersgd | torch-mlp:*)
      [[ "$with_torch" == 1 ]] || return 0
      [[ "$workload:$variant" != torch-mlp:torch-floor ]] || return 0  # = its floor
      local model=mlp4m
      [[ "$workload" != cpp-mlp ]] || model=fmnist-mlp
      program=("$python" "$root/bench/e2e/torch_step_bench.py" --model "$model"
               --variant "${variant#torch-}" --data-dir "$data_dir" "${bench_flags[@]}")
      ;;
    *)
      echo "bench-e2e: unknown workload or variant '$workload' '$variant'" >&2
      return 0
      ;;
  esac
  local -a runtime=()
  case $variant in
    dense) runtime=(--compressor none) ;;
    arctopk) runtime=(--compressor arctopk --compress-ratio 0.01) ;;
    topk) runtime=(--compressor topk --compress-ratio 0.01) ;;
    # As bench-tta.sh's variants of the same names, so that their steps and these step times
    # compose: shared Rand-K with ef14, Ok-Topk with its own residual, both at the default ratio.
    randk) runtime=(--compressor randk --error-feedback ef14) ;;
    oktopk) runtime=(--compressor oktopk) ;;
    powersgd) runtime=(--compressor powersgd) ;;
    # The step of the paper's configuration once compressing: its 1000 dense warm-up steps are
    # dense's step, and --step-bench times tens of steps.
    paper) runtime=(--preset paper --warmup-steps 0) ;;
  esac
  local -a launch=("$@")
  launch+=("${runtime[@]}" -x "MASTER_PORT=$(free_port)" -x "PYTHONPATH=$build_dir/python")
  echo
  bench_show "${launch[@]}" -- "${program[@]}"
  local status=0
  timeout "$run_timeout" "${launch[@]}" -- "${program[@]}" >"$dir/out" 2>&1 || status=$?
  cat "$dir/out"
  "$python" "$root/bench/e2e/make_report.py" collect "setting=$setting" "hosts=$hosts" \
    "link=$link" "workload=$workload" "variant=$variant" "exit=$status" "pass=$pass" \
    <"$dir/out" >>"$out_dir/results.jsonl"
  ((status == 0)) || echo "bench-e2e: $workload $variant exited $status"
}

run_setting() {  # launch words...
  local workload variant
  for ((pass = 1; pass <= passes; ++pass)); do
    for workload in $workloads; do
      for variant in $variants; do
        run_one "$workload" "$variant" -- "$@"
      done
    done
  done
}


ran=0
for hosts in $host_counts; do
  if ((hosts == 1)); then
    setting="1 host" link="local (shared memory)"
    echo
    echo "=== $setting, $local_ranks ranks ==="
    run_setting "$build_dir/launcher/arcrun" -np "$local_ranks" -x MASTER_ADDR=127.0.0.1
    ran=1
    continue
  fi
  for rate in $rates; do
    budget_cores=$(bench_host_budget "$hosts" "$host_cpus")
    setting="$hosts hosts $rate" link="simulated, $rate per host"
    budget_args=()
    if [[ -n "$budget_cores" ]]; then
      setting+=", ${budget_cores} core each"
      link+=", ${budget_cores} core per host"
      budget_args=(--cpus "$budget_cores")
      if [[ -n "$cpu_period" ]]; then
        setting+=" in ${cpu_period} us periods"
        budget_args+=(--cpu-period "$cpu_period")
      fi
    fi
    echo
    echo "=== $setting, one rank per host ==="
    bench_show bash scripts/sim-cluster.sh up "$hosts" --rate "$rate" "${budget_args[@]}" \
      --name "$name" --dir "$cluster_dir"
    status=0
    up_log=$(bash "$root/scripts/sim-cluster.sh" up "$hosts" --rate "$rate" "${budget_args[@]}" \
      --name "$name" --dir "$cluster_dir" 2>&1) || status=$?
    echo "${up_log//"$cluster_dir"/DIR}"
    if ((status == 77)); then
      echo "bench-e2e: no simulated cluster here (see above): cluster settings skipped"
      break 2
    fi
    ((status == 0)) || exit 1
    # shellcheck disable=SC1091  # written by `sim-cluster.sh up`
    source "$cluster_dir/cluster.env"
    # shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
    # gloo listens on host 1's address; every host's only interface is eth0.
    run_setting "$build_dir/launcher/arcrun" -np "$hosts" --hostfile "$hostfile" \
      --rsh-agent "$rsh_agent" --network-interface "$network" --mpi-args "$mpi_args" \
      -x "MASTER_ADDR=${network%.0/24}.1" -x GLOO_SOCKET_IFNAME=eth0
    ran=1
    bash "$root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" >/dev/null
  done
done

((ran)) || exit 77
echo
# The output folder as OUT_DIR: raw.txt names no path of this machine.
"$python" "$root/bench/e2e/make_report.py" report "$out_dir" | sed "s#$out_dir#OUT_DIR#g"
