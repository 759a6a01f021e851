#!/usr/bin/env bash
# Several ranks per host, flat against hierarchical (docs/benchmarks.md, "Several ranks per
# host"): for every host count in HOSTS, ranks per host in SLOTS and rate in RATES, a simulated
# cluster (scripts/sim-cluster.sh --slots, each host's CPU budget as in the other benchmarks)
# runs examples/03's training step (--step-bench STEPS) for every variant in VARIANTS under
# ARCREDUCE_HIERARCHICAL=0 and each of MODES, PASSES times, and counts the bytes that cross
# host 1's link per timed step (its eth0's counters, both ways: --link-counters).
# Appends one JSON line per run to OUT_DIR/results.jsonl, the output to OUT_DIR/raw.txt, then
# prints the table (bench/e2e/hierarchy_report.py).
#
#   bash scripts/bench-hierarchy.sh
#   HOSTS=2 SLOTS=4 RATES=100mbit VARIANTS=arctopk bash scripts/bench-hierarchy.sh
#
# Environment: HOSTS ("2 4"), SLOTS ("1 2 4": one rank per host is the baseline), RATES
# ("100mbit 1gbit"), VARIANTS ("dense arctopk"), MODES ("auto": the settings of
# ARCREDUCE_HIERARCHICAL measured against 0), STEPS (20), PASSES (1), CPUS ("auto"),
# BUILD_DIR (build/), OUT_DIR (docs/results/hierarchy), DATA_DIR.
# Exit status: 0 done, 1 a build failure, 77 no simulated cluster here.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
out_dir=${OUT_DIR:-$root/docs/results/hierarchy}
host_counts=${HOSTS:-2 4}
slot_counts=${SLOTS:-1 2 4}
rates=${RATES:-100mbit 1gbit}
variants=${VARIANTS:-dense arctopk}
modes=${MODES:-auto}
steps=${STEPS:-20}
passes=${PASSES:-1}
host_cpus=${CPUS:-auto}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
python=${PYTHON:-/usr/bin/python3}
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"
bench_build "$build_dir" arcrun train_fashion_mnist || exit 1
commit=$(bench_commit "$root")
bench_scratch "$root" arch hierarchy
mkdir -p "$out_dir"
touch "$out_dir/results.jsonl"
exec > >(tee -a "$out_dir/raw.txt") 2>&1
echo "bench-hierarchy $(date -u '+%Y-%m-%d %H:%M UTC') commit $commit, $(nproc) CPUs"

run_steps() {  # variant mode: the JSON line in `line`
  local program=("$build_dir/examples/03_fashion_mnist/train_fashion_mnist" --step-bench "$steps"
    --step-bench-warmup 8 --step-bench-budget 0 --data-dir "$data_dir" --train-samples 16384
    --test-samples 1 --compressor "$1" --link-counters eth0)
  line=$("${launch[@]}" -x "ARCREDUCE_HIERARCHICAL=$2" -- "${program[@]}" 2>&1 |
    grep -m1 '^{"bench"' || true)
}

record() {  # hosts slots rate mode pass: `line` tagged, appended to results.jsonl
  "$python" -c 'import json, sys
row = json.loads(sys.argv[1])
for key in ("step_s", "wait_s"):
    row.pop(key, None)
row.update({"bench": "hierarchy", "hosts": int(sys.argv[2]), "slots": int(sys.argv[3]),
            "rate": sys.argv[4], "hierarchical": sys.argv[5], "pass": int(sys.argv[6]),
            "commit": sys.argv[7]})
print(json.dumps(row))' "$line" "$@" "$commit" >>"$out_dir/results.jsonl"
  "$python" -c 'import json, sys
r = json.loads(sys.argv[1])
print("median %.4f s, %.0f bytes a step on host 1 link, hierarchical %s" % (
    r["median_s"], r["link_bytes_per_step"], r["hierarchical"]))' "$line"
}

ran=0
for hosts in $host_counts; do
  for slots in $slot_counts; do
    for rate in $rates; do
      budget=$(bench_host_budget "$hosts" "$host_cpus")
      budget_args=()
      [[ -z "$budget" ]] || budget_args=(--cpus "$budget")
      status=0
      up_log=$(bash "$root/scripts/sim-cluster.sh" up "$hosts" --rate "$rate" --slots "$slots" \
        "${budget_args[@]}" --name "$name" --dir "$cluster_dir" 2>&1) || status=$?
      if ((status == 77)); then
        echo "$up_log"
        echo "bench-hierarchy: no simulated cluster here: skipped"
        exit 77
      fi
      ((status == 0)) || { echo "$up_log"; exit 1; }
      # shellcheck disable=SC1091  # written by `sim-cluster.sh up`
      source "$cluster_dir/cluster.env"
      # shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
      launch=("$build_dir/launcher/arcrun" -np "$((hosts * slots))" --hostfile "$hostfile"
        --rsh-agent "$rsh_agent" --network-interface "$network" --mpi-args "$mpi_args")
      echo
      echo "=== $hosts hosts x $slots ranks x $rate, CPU budget ${budget:-none} per host ==="
      for ((pass = 1; pass <= passes; pass++)); do
        for variant in $variants; do
          settings="0 $modes"
          ((slots > 1)) || settings=0  # nothing to do with one rank per host
          for mode in $settings; do
            run_steps "$variant" "$mode"
            if [[ -z "$line" ]]; then
              echo "bench-hierarchy: $variant hierarchical=$mode failed"
              continue
            fi
            echo "pass $pass $variant hierarchical=$mode: $(record "$hosts" "$slots" "$rate" \
              "$mode" "$pass")"
          done
        done
      done
      ran=1
      bash "$root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" >/dev/null
    done
  done
done
((ran)) || exit 77
"$python" "$root/bench/e2e/hierarchy_report.py" "$out_dir/results.jsonl" --commit "$commit"
