#!/usr/bin/env bash
# Time-to-accuracy benchmark (docs/time-to-accuracy.md): examples/03_fashion_mnist's MLP trained
# with `train_fashion_mnist --tta`, examples/04's CNN with `train.py --tta` through
# arcreduce.torch or PyTorch DDP, and examples/05's transformer language model with `train.py
# --target-loss` (evaluation every EVAL_EVERY steps, LM_EVAL_EVERY for the transformer, the clock
# stopped while it evaluates), for every workload, variant, seed and setting. Per workload,
# setting and seed, dense trains first, for DENSE_EPOCHS epochs (the transformer: LM_STEPS
# steps); its final accuracy (the mean of the evaluations of its last epoch, which evens out the
# noise of a single evaluation) minus MARGIN points, or for the transformer its final validation
# loss plus LM_MARGIN, is the target every other variant trains to, for at most BUDGET_FACTOR
# times dense's steps. Prints
# every command and its progress; writes OUT_DIR/results.jsonl (one JSON line per run),
# raw.txt, then table.md and accuracy.png (bench/tta/make_report.py).
#
#   bash scripts/bench-tta.sh
#   WORKLOADS=mlp SETTINGS=local SEEDS=1 VARIANTS="arctopk-default randk" bash scripts/bench-tta.sh
#   WORKLOADS=cnn SETTINGS=local TEST_SAMPLES=2000 bash scripts/bench-tta.sh
#   WORKLOADS=lm SETTINGS=local SEEDS=0 OUT_DIR=docs/results/tta-lm bash scripts/bench-tta.sh
#
# Variants: dense, auto (the runtime's defaults, nothing set: ARCREDUCE_AUTO_COMPRESS chooses),
# arctopk-default (the former defaults: ARC-Top-K at 1% with efm, always), arctopk-0.01,
# arctopk-0.05, arctopk-0.2 (ratio set, error feedback and the rest at their defaults),
# arctopk-random (every row drawn at random, ARCREDUCE_RANDOM_ROWS=1, so no sketch, with ef14:
# the MLP's fastest setting with the optimizer's momentum in docs/time-to-accuracy.md),
# arctopk-random-efm (every row at random with the runtime's efm and no masking,
# ARCREDUCE_EF_MASKING=0: as fast on the MLP, with the momentum in the runtime), paper
# (ARCREDUCE_PRESET=paper: the ARC-Top-K paper's settings, its dense warm-up included; not in the
# default set), paper-warmup-N (the same with N dense warm-up steps), topk
# (ef14), randk (ef14), oktopk, powersgd (rank 1), and for the CNN and the transformer ddp and
# ddp-powersgd (PyTorch DDP over gloo, and with its PowerSGD hook at rank 1), ddp-hook (DDP with
# arcreduce's communication hook at the runtime's defaults; not in the default set). Workloads: mlp, cnn,
# lm (the transformer; not in the default: its runs take hours on 2 cores). Settings: local
# (RANKS ranks on this machine) and NxRATE (a simulated cluster of N hosts at RATE, one rank per
# host, e.g. 4x1gbit; needs root and network namespaces, skipped with a message elsewhere).
# Environment: WORKLOADS ("mlp cnn"), SETTINGS ("local 4x1gbit"), SEEDS ("0 1"), VARIANTS (all
# above; the MLP skips the DDP ones: examples/03 is C++), RANKS (4), EVAL_EVERY (25),
# TRAIN_SAMPLES (60000: the first N training examples), TEST_SAMPLES (10000: the first N test
# examples are evaluated; the CNN's evaluation of all of them takes longer than its training
# between two evaluations on 2 cores), DENSE_EPOCHS (3), MARGIN (0.5), LM_STEPS (600),
# LM_EVAL_EVERY (50), LM_MARGIN (0.01: 1%), LM_ARGS (more flags of the transformer, e.g. a smaller
# model: "--width 128 --layers 2"), CPUS (each simulated host's CPU budget in cores:
# "auto", the default, gives the hosts 0.9 of the machine's cores between them; 0: none, the hosts
# share the cores, as the runs before budgets), BUDGET_FACTOR (3), DENSE_FROM (an earlier run's
# results.jsonl: its dense rows of the same workload, setting and seed are reused instead of
# training dense again), RUN_TIMEOUT (1800 s; the
# transformer: 3600 s), BUILD_DIR (build/), OUT_DIR (docs/results/tta), PYTHON
# (/usr/bin/python3), DATA_DIR.
# Exit status: 0 done (failed runs are rows marked failed), 1 a build or report failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
out_dir=${OUT_DIR:-$root/docs/results/tta}
settings=${SETTINGS:-local 4x1gbit}
seeds=${SEEDS:-0 1}
workloads=${WORKLOADS:-mlp cnn}
all_variants="dense auto arctopk-default arctopk-0.01 arctopk-0.05 arctopk-0.2 arctopk-random topk"
all_variants+=" randk oktopk"
all_variants+=" powersgd ddp ddp-powersgd"
variants=${VARIANTS:-$all_variants}
ranks=${RANKS:-4}
host_cpus=${CPUS:-auto}  # not `cpus`: cluster.env, sourced below, sets that
eval_every=${EVAL_EVERY:-25}
train_samples=${TRAIN_SAMPLES:-60000}
test_samples=${TEST_SAMPLES:-10000}
dense_epochs=${DENSE_EPOCHS:-3}
margin=${MARGIN:-0.5}
lm_steps=${LM_STEPS:-600}
lm_eval_every=${LM_EVAL_EVERY:-50}
lm_margin=${LM_MARGIN:-0.01}
read -r -a lm_args <<<"${LM_ARGS:-}"
budget_factor=${BUDGET_FACTOR:-3}
run_timeout=${RUN_TIMEOUT:-1800}
python=${PYTHON:-/usr/bin/python3}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers forbid cross-memory attach

cmake --build "$build_dir" -j "$(nproc)" --target arcrun train_fashion_mnist >/dev/null || exit 1
if [[ " $workloads " =~ " "(cnn|lm)" " ]] && ! "$python" -c 'import torch' 2>/dev/null; then
  echo "bench-tta: $python has no torch: the CNN and the transformer are skipped" \
    "(apt-get install python3-torch)" >&2
  workloads=${workloads//cnn/}
  workloads=${workloads//lm/}
fi
# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"
commit=$(bench_commit "$root")
bench_scratch "$root" arct tta

mkdir -p "$out_dir"
: >"$out_dir/results.jsonl"
exec > >(tee "$out_dir/raw.txt") 2>&1
echo "bench-tta $(date -u '+%Y-%m-%d %H:%M UTC') commit $commit, $(nproc) CPUs," \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"

variant_flags() {  # workload variant -> the flags of its program
  local option=--compressor
  [[ "$1" == mlp ]] || option=--variant
  case $2 in
    dense) echo "$option" dense ;;
    auto | arctopk-default) echo "$option" arctopk ;;
    arctopk-random) echo "$option" arctopk --error-feedback ef14 ;;
    arctopk-random-efm | paper | paper-warmup-*) echo "$option" arctopk ;;
    arctopk-*) echo "$option" arctopk --compress-ratio "${2#arctopk-}" ;;
    topk | randk) echo "$option" "$2" --error-feedback ef14 ;;
    oktopk | powersgd) echo "$option" "$2" ;;
    ddp | ddp-powersgd | ddp-hook) [[ "$1" != mlp ]] && echo --variant "$2" ;;
    *) return 1 ;;
  esac
}

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

program_of() {  # workload -> the program and its data flags
  case $1 in
    mlp) echo "$build_dir/examples/03_fashion_mnist/train_fashion_mnist" ;;
    cnn) echo "$python" "$root/examples/04_pytorch_fashion_mnist/train.py" ;;
    lm) echo "$python" "$root/examples/05_char_transformer/train.py" ;;
  esac
}

# One run: prints the command and its output; appends its JSON line, tagged, to results.jsonl
# (a "failed" line where it printed none).
run_one() {  # workload setting seed variant target max_steps -- launch words...
  local workload=$1 setting=$2 seed=$3 variant=$4 target=$5 max_steps=$6
  shift 7
  local -a flags command
  read -r -a flags <<<"$(variant_flags "$workload" "$variant")"
  if ((${#flags[@]} == 0)); then
    echo "bench-tta: variant '$variant' does not apply to the $workload: skipped" >&2
    return 0
  fi
  local -a settings_env
  read -r -a settings_env <<<"$(bench_variant_env "$variant")"
  read -r -a command <<<"$(program_of "$workload")"
  local -a program
  if [[ "$workload" == lm ]]; then
    program=("${command[@]}" --json --seed "$seed" --steps "$max_steps"
      --eval-every "$lm_eval_every" --target-loss "$target" "${lm_args[@]}" "${flags[@]}")
  else
    program=("${command[@]}" --tta
      --seed "$seed" --max-steps "$max_steps" --eval-every "$eval_every"
      --target-accuracy "$target" --data-dir "$data_dir" --train-samples "$train_samples"
      --test-samples "$test_samples"
      "${flags[@]}")
  fi
  # The runtime's own defaults: no ARCREDUCE_* from this shell.
  local -a clean=(env)
  while IFS='=' read -r var _; do clean+=(-u "$var"); done < <(env | grep '^ARCREDUCE_' || true)
  echo
  local shown="${*//"$build_dir"/BUILD}"
  ((${#settings_env[@]} == 0)) || shown+=" ${settings_env[*]}"
  echo "\$ $shown -- ${program[*]//"$build_dir"/BUILD}" |
    sed "s#$root/##g; s#$cluster_dir#DIR#g"
  local status=0
  # DDP's rendezvous: a port of its own per run (an earlier run's may still be in TIME_WAIT).
  local limit=$run_timeout
  [[ "$workload" != lm ]] || limit=${RUN_TIMEOUT:-3600}
  timeout "$limit" "${clean[@]}" "$@" "${settings_env[@]}" -x "MASTER_PORT=$(free_port)" \
    -- "${program[@]}" \
    >"$dir/out" 2>&1 || status=$?
  grep -v '^{"bench"' "$dir/out" || true
  local line
  line=$(grep -m1 -E '^\{"bench": "(tta|lm)"' "$dir/out" || true)
  [[ -n "$line" ]] || line='{"bench": "tta", "failed": true}'
  "$python" - "$workload" "$setting" "$variant" "$status" "$seed" "$line" \
    >>"$out_dir/results.jsonl" <<'EOF'
import json, sys
workload, setting, variant, status, seed, line = sys.argv[1:]
row = json.loads(line)
row.update(workload=workload, setting=setting, variant=variant, exit=int(status))
row.setdefault("seed", int(seed))
if "target_loss" in row:  # the transformer: its target is a validation loss
    row["target"] = row["target_loss"]
print(json.dumps(row))
EOF
  ((status == 0)) || echo "bench-tta: $workload $setting seed $seed $variant exited $status"
}

# dense's target and steps: the mean accuracy of its last epoch's evaluations less the margin
# (percent), or for the transformer its final validation loss times 1 + LM_MARGIN.
dense_target() {  # workload setting seed
  "$python" - "$out_dir/results.jsonl" "$1" "$2" "$3" "$margin" "$lm_margin" <<'EOF'
import json, sys
path, workload, setting = sys.argv[1:4]
seed, margin, lm_margin = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
for line in open(path):
    r = json.loads(line)
    if r.get("workload") == workload and r.get("setting") == setting and r.get("seed") == seed \
            and r.get("variant") == "dense" and not r.get("failed"):
        last = r["points"][-1]["step"]
        if workload == "lm":
            print(f'{r["points"][-1]["val_loss"] * (1 + lm_margin):.4f} {last}')
            break
        tail = [p["test_accuracy"] for p in r["points"] if p["step"] > last - r["steps_per_epoch"]]
        print(f"{100 * sum(tail) / len(tail) - margin:.2f} {last}")
        break
EOF
}

run_setting() {  # setting -- launch words...
  local setting=$1
  shift 2
  local workload
  for workload in $workloads; do
    run_workload "$workload" "$setting" -- "$@"
  done
}

run_workload() {  # workload setting -- launch words...
  local workload=$1 setting=$2
  shift 3
  local seed variant steps_per_epoch dense_steps target
  # The training examples in global batches of 64 per rank.
  local launch_ranks=$ranks
  [[ "$setting" == local ]] || launch_ranks=${setting%%x*}
  steps_per_epoch=$((train_samples / (64 * launch_ranks)))
  dense_steps=$((dense_epochs * steps_per_epoch))
  [[ "$workload" != lm ]] || dense_steps=$lm_steps
  for seed in $seeds; do
    echo
    echo "=== $workload, $setting, seed $seed ==="
    if [[ -n "${DENSE_FROM:-}" ]]; then
      # Dense's run does not depend on the other variants: reuse an earlier one of this setting
      # and seed (DENSE_FROM, a results.jsonl) instead of training it again.
      "$python" - "$DENSE_FROM" "$workload" "$setting" "$seed" >>"$out_dir/results.jsonl" <<'END'
import json, sys
path, workload, setting, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for line in open(path):
    r = json.loads(line)
    if (r.get("workload"), r.get("setting"), r.get("seed"), r.get("variant")) == \
            (workload, setting, seed, "dense"):
        print(json.dumps(r))
        break
END
      echo "dense: reused from ${DENSE_FROM#"$root/"}"
    else
      run_one "$workload" "$setting" "$seed" dense 0 "$dense_steps" -- "$@"
    fi
    read -r target dense_steps <<<"$(dense_target "$workload" "$setting" "$seed")" || {
      echo "bench-tta: dense failed on $workload $setting seed $seed: no target" >&2
      continue
    }
    if [[ "$workload" == lm ]]; then
      echo "target: validation loss $target (dense's final loss + $lm_margin of it), budget" \
        "$((budget_factor * dense_steps)) steps"
    else
      echo "target: ${target}% (dense's last epoch less $margin points), budget" \
        "$((budget_factor * dense_steps)) steps"
    fi
    for variant in $variants; do
      [[ "$variant" != dense ]] || continue
      run_one "$workload" "$setting" "$seed" "$variant" "$target" \
        "$((budget_factor * dense_steps))" -- "$@"
    done
  done
}

for setting in $settings; do
  if [[ "$setting" == local ]]; then
    run_setting local -- "$build_dir/launcher/arcrun" -np "$ranks" \
      -x "PYTHONPATH=$build_dir/python" -x MASTER_ADDR=127.0.0.1
    continue
  fi
  hosts=${setting%%x*} rate=${setting#*x}
  budget_cores=$(bench_host_budget "$hosts" "$host_cpus")
  budget_args=()
  [[ -z "$budget_cores" ]] || budget_args=(--cpus "$budget_cores")
  echo "=== $setting: $hosts simulated hosts at $rate, CPU budget ${budget_cores:-none} per host ==="
  status=0
  up_log=$(bash "$root/scripts/sim-cluster.sh" up "$hosts" --rate "$rate" "${budget_args[@]}" \
    --name "$name" --dir "$cluster_dir" 2>&1) || status=$?
  echo "${up_log//"$cluster_dir"/DIR}"
  if ((status == 77)); then
    echo "bench-tta: no simulated cluster here (see above): $setting skipped"
    continue
  fi
  ((status == 0)) || exit 1
  # shellcheck disable=SC1091  # written by `sim-cluster.sh up`
  source "$cluster_dir/cluster.env"
  # shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
  run_setting "$setting" -- "$build_dir/launcher/arcrun" -np "$hosts" --hostfile "$hostfile" \
    --rsh-agent "$rsh_agent" --network-interface "$network" --mpi-args "$mpi_args" \
    -x "PYTHONPATH=$build_dir/python" -x "MASTER_ADDR=${network%.0/24}.1" -x GLOO_SOCKET_IFNAME=eth0
  bash "$root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" >/dev/null
done

echo
"$python" "$root/bench/tta/make_report.py" "$out_dir"
