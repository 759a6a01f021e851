#!/usr/bin/env bash
# The All-Reduce algorithms across hosts (docs/design/communicators-allreduce.md):
# for every host count in HOSTS and rate in RATES, a simulated cluster (scripts/sim-cluster.sh,
# one rank per host, each host's CPU budget as in the other benchmarks) runs
#   reduce    bench/algorithm_bench: ring, rabenseifner, doubling, mpi and auto on messages of
#             KILOBYTES, with the link model's predictions (skipped with REDUCE=0)
#   step      examples/03's training step (--step-bench STEPS) for every variant in VARIANTS under
#             every ARCREDUCE_ALLREDUCE_ALGORITHM in ALGORITHMS, the variants and algorithms
#             interleaved, PASSES times
# Appends one JSON line per run to OUT_DIR/results.jsonl, the output to OUT_DIR/raw.txt, then
# prints the tables of bench/e2e/algorithm_report.py.
#
#   bash scripts/bench-algorithms.sh
#   HOSTS=8 RATES=100mbit PASSES=5 REDUCE=0 bash scripts/bench-algorithms.sh
#
# Environment: HOSTS ("2 4 8"), RATES ("25mbit 100mbit 1gbit"), VARIANTS ("dense arctopk topk":
# the defaults of dense and ARC-Top-K, All-Gather Top-K at ratio 0.01), ALGORITHMS ("auto ring
# rabenseifner doubling thresholds"; topk runs auto and thresholds only), DENSE_ALGORITHMS (those
# dense runs: "auto ring thresholds"; doubling takes minutes a step), PASSES (3), STEPS (20),
# KILOBYTES ("1 16 64 256 1024 7450"), REPETITIONS (5), CPUS ("auto": 0.9 of the machine's cores
# shared by the hosts; 0: none), BUILD_DIR (build/), OUT_DIR (docs/results/algorithms), DATA_DIR.
# Exit status: 0 done, 1 a build failure, 77 no simulated cluster here.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
out_dir=${OUT_DIR:-$root/docs/results/algorithms}
host_counts=${HOSTS:-2 4 8}
rates=${RATES:-25mbit 100mbit 1gbit}
variants=${VARIANTS:-dense arctopk topk}
algorithms=${ALGORITHMS:-auto ring rabenseifner doubling thresholds}
dense_algorithms=${DENSE_ALGORITHMS:-auto ring thresholds}
passes=${PASSES:-3}
steps=${STEPS:-20}
kilobytes=${KILOBYTES:-1 16 64 256 1024 7450}
repetitions=${REPETITIONS:-5}
host_cpus=${CPUS:-auto}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
python=${PYTHON:-/usr/bin/python3}
export OMPI_MCA_btl_vader_single_copy_mechanism=none

cmake --build "$build_dir" -j "$(nproc)" --target arcrun train_fashion_mnist algorithm_bench \
  >/dev/null || exit 1
# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"
commit=$(bench_commit "$root")
bench_scratch "$root" arca algorithms
mkdir -p "$out_dir"
touch "$out_dir/results.jsonl"
exec > >(tee -a "$out_dir/raw.txt") 2>&1
echo "bench-algorithms $(date -u '+%Y-%m-%d %H:%M UTC') commit $commit, $(nproc) CPUs"

tag() {  # JSON line, then key=value pairs -> the line with them added
  "$python" -c 'import json, sys
row = json.loads(sys.argv[1])
for pair in sys.argv[2:]:
    key, value = pair.split("=", 1)
    row[key] = value
print(json.dumps(row))' "$@"
}

step_flags() {
  case $1 in
    dense) echo --compressor dense ;;
    arctopk) echo --compressor arctopk ;;
    topk) echo --compressor topk --compress-ratio 0.01 ;;
  esac
}

ran=0
for hosts in $host_counts; do
  for rate in $rates; do
    budget=$(bench_host_budget "$hosts" "$host_cpus")
    budget_args=()
    [[ -z "$budget" ]] || budget_args=(--cpus "$budget")
    status=0
    up_log=$(bash "$root/scripts/sim-cluster.sh" up "$hosts" --rate "$rate" "${budget_args[@]}" \
      --name "$name" --dir "$cluster_dir" 2>&1) || status=$?
    if ((status == 77)); then
      echo "$up_log"
      echo "bench-algorithms: no simulated cluster here: skipped"
      exit 77
    fi
    ((status == 0)) || { echo "$up_log"; exit 1; }
    # shellcheck disable=SC1091  # written by `sim-cluster.sh up`
    source "$cluster_dir/cluster.env"
    # shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
    launch=("$build_dir/launcher/arcrun" -np "$hosts" --hostfile "$hostfile"
      --rsh-agent "$rsh_agent" --network-interface "$network" --mpi-args "$mpi_args")
    echo
    echo "=== $hosts hosts x $rate, CPU budget ${budget:-none} per host ==="
    if [[ "${REDUCE:-1}" != 0 ]]; then
      read -r -a sizes <<<"$kilobytes"
      bench_show "${launch[@]}" -- "$build_dir/bench/algorithm_bench" --repetitions \
        "$repetitions" --kilobytes "${sizes[@]}"
      "${launch[@]}" -- "$build_dir/bench/algorithm_bench" --repetitions "$repetitions" \
        --kilobytes "${sizes[@]}" --json >"$cluster_dir/reduce.out" 2>&1 || true
      grep '^{' "$cluster_dir/reduce.out" | while read -r line; do
        tag "$line" "hosts=$hosts" "rate=$rate" "commit=$commit" >>"$out_dir/results.jsonl"
      done
      grep -v '^{' "$cluster_dir/reduce.out" | grep -v setpgid || true
      "$python" "$root/bench/e2e/algorithm_report.py" reduce "$out_dir/results.jsonl" \
        --hosts "$hosts" --rate "$rate" --commit "$commit"
    fi
    for ((pass = 1; pass <= passes; pass++)); do
      for variant in $variants; do
        for algorithm in $algorithms; do
          if [[ $variant == topk && $algorithm != auto && $algorithm != thresholds ]]; then
            continue
          fi
          if [[ $variant == dense && ! " $dense_algorithms " =~ " $algorithm " ]]; then
            continue
          fi
          read -r -a flags <<<"$(step_flags "$variant")"
          program=("$build_dir/examples/03_fashion_mnist/train_fashion_mnist" --step-bench "$steps"
            --step-bench-warmup 8 --step-bench-budget 10 --data-dir "$data_dir"
            --train-samples 16384 --test-samples 1 "${flags[@]}")
          ((pass > 1)) || bench_show "${launch[@]}" -x "ARCREDUCE_ALLREDUCE_ALGORITHM=$algorithm" \
            -- "${program[@]}"
          line=$("${launch[@]}" -x "ARCREDUCE_ALLREDUCE_ALGORITHM=$algorithm" -- "${program[@]}" \
            2>&1 | grep -m1 '^{"bench"' || true)
          if [[ -z "$line" ]]; then
            echo "bench-algorithms: $variant $algorithm failed at $hosts x $rate"
            continue
          fi
          tag "$line" "hosts=$hosts" "rate=$rate" "algorithm=$algorithm" "pass=$pass" \
            "commit=$commit" "name=$variant" >>"$out_dir/results.jsonl"
          echo "pass $pass $variant $algorithm: median $("$python" -c 'import json, sys
r = json.loads(sys.argv[1])
print("%.4f s, %.0f bytes sent per step, %s" % (r["median_s"], r["bytes_sent_per_step"],
      r.get("allreduce_calls_per_step")))' "$line")"
        done
      done
    done
    "$python" "$root/bench/e2e/algorithm_report.py" step "$out_dir/results.jsonl" \
      --hosts "$hosts" --rate "$rate" --commit "$commit"
    ran=1
    bash "$root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" >/dev/null
  done
done
((ran)) || exit 77
