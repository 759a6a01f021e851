#!/usr/bin/env bash
# Step times of examples/05's transformer (or, with WORKLOAD=cnn, examples/04's CNN) on a
# simulated cluster, for time to accuracy composed
# as steps (scripts/bench-tta.sh at the same world size) times step time
# (docs/time-to-accuracy.md). For every rate in RATES: HOSTS simulated hosts (one rank each, CPU
# budgets as in the other benchmarks), every variant of VARIANTS trained for STEPS steps with
# one evaluation halfway; the step time is the training time of the second half over its steps
# (the first half warms up). Appends one JSON line per run to OUT_DIR/results.jsonl and prints
# them.
#
#   HOSTS=8 RATES="100mbit 1gbit" bash scripts/bench-lm-steps.sh
#
# Environment: WORKLOAD (lm, or cnn), HOSTS (8), RATES ("25mbit 100mbit 1gbit"), VARIANTS
# ("dense arctopk topk randk oktopk powersgd ddp ddp-powersgd", with bench-tta's error feedback;
# also paper and paper-warmup-N, bench-tta's), STEPS (40), LM_ARGS ("--width 128 --layers 2":
# the configuration of the 8-rank runs), CPUS ("auto"), BUILD_DIR, OUT_DIR (docs/results/lm-steps;
# with WORKLOAD=cnn docs/results/cnn-steps), PYTHON (/usr/bin/python3).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
workload=${WORKLOAD:-lm}
[[ "$workload" == lm || "$workload" == cnn ]] || {
  echo "bench-lm-steps: WORKLOAD='$workload' is not lm or cnn" >&2
  exit 1
}
out_dir=${OUT_DIR:-$root/docs/results/$workload-steps}
hosts=${HOSTS:-8}
rates=${RATES:-25mbit 100mbit 1gbit}
variants=${VARIANTS:-dense arctopk topk randk oktopk powersgd ddp ddp-powersgd}
steps=${STEPS:-40}
read -r -a lm_args <<<"${LM_ARGS:---width 128 --layers 2}"
host_cpus=${CPUS:-auto}
python=${PYTHON:-/usr/bin/python3}
export OMPI_MCA_btl_vader_single_copy_mechanism=none

cmake --build "$build_dir" -j "$(nproc)" --target arcrun arcreduce_torch >/dev/null || exit 1
# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"
commit=$(bench_commit "$root")
bench_scratch "$root" arcl lmsteps
mkdir -p "$out_dir"
exec > >(tee -a "$out_dir/raw.txt") 2>&1
echo "bench-lm-steps $(date -u '+%Y-%m-%d %H:%M UTC') commit $commit, $(nproc) CPUs"

flags_of() {
  case $1 in
    topk | randk) echo --variant "$1" --error-feedback ef14 ;;
    paper | paper-warmup-*) echo --variant arctopk ;;
    *) echo --variant "$1" ;;
  esac
}

for rate in $rates; do
  budget=$(bench_host_budget "$hosts" "$host_cpus")
  budget_args=()
  [[ -z "$budget" ]] || budget_args=(--cpus "$budget")
  status=0
  up_log=$(bash "$root/scripts/sim-cluster.sh" up "$hosts" --rate "$rate" "${budget_args[@]}" \
    --name "$name" --dir "$cluster_dir" 2>&1) || status=$?
  ((status != 77)) || { echo "$up_log"; exit 77; }
  ((status == 0)) || { echo "$up_log"; exit 1; }
  # shellcheck disable=SC1091  # written by `sim-cluster.sh up`
  source "$cluster_dir/cluster.env"
  echo "=== $hosts hosts x $rate, CPU budget ${budget:-none} per host ==="
  for variant in $variants; do
    read -r -a flags <<<"$(flags_of "$variant")"
    read -r -a settings_env <<<"$(bench_variant_env "$variant")"
    port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
    # shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
    launch=("$build_dir/launcher/arcrun" -np "$hosts" --hostfile "$hostfile"
      --rsh-agent "$rsh_agent" --network-interface "$network" --mpi-args "$mpi_args"
      -x "PYTHONPATH=$build_dir/python" -x "MASTER_ADDR=${network%.0/24}.1"
      -x "MASTER_PORT=$port" -x GLOO_SOCKET_IFNAME=eth0 "${settings_env[@]}")
    if [[ "$workload" == lm ]]; then
      program=("$python" "$root/examples/05_char_transformer/train.py" --steps "$steps"
        --eval-every "$((steps / 2))" "${lm_args[@]}" "${flags[@]}")
    else
      program=("$python" "$root/examples/04_pytorch_fashion_mnist/train.py" --tta
        --max-steps "$steps" --eval-every "$((steps / 2))" --test-samples 2000 "${flags[@]}")
    fi
    bench_show "${launch[@]}" -- "${program[@]}"
    out=$(env -u ARCREDUCE_ALLREDUCE_ALGORITHM "${launch[@]}" -- "${program[@]}" 2>&1 || true)
    "$python" - "$workload" "$variant" "$rate" "$hosts" "$steps" "$commit" "$out" \
      >>"$out_dir/results.jsonl" <<'PY'
import json, re, sys
workload, variant, rate, hosts, steps, commit, out = sys.argv[1:]
train = {int(m.group(1)): float(m.group(2))
         for m in re.finditer(r"step (\d+)/\d+ .*? train ([\d.]+) s", out)}
half, last = int(steps) // 2, int(steps)
row = {"bench": "lm-steps", "workload": workload, "variant": variant, "rate": rate,
       "hosts": int(hosts), "commit": commit}
if half in train and last in train:
    row["step_s"] = (train[last] - train[half]) / (last - half)
else:
    row["failed"] = True
print(json.dumps(row))
PY
    tail -1 "$out_dir/results.jsonl"
  done
  bash "$root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" >/dev/null
done
