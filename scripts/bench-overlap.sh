#!/usr/bin/env bash
# Overlap of the gradient exchange with backward (docs/benchmarks.md, "Overlap"): on a simulated
# cluster (scripts/sim-cluster.sh, one rank per host), ROUNDS interleaved rounds of
#   cpp-mlp    examples/03's MLP: train_fashion_mnist --overlap-steps N (after one short epoch)
#   torch-mlp  the 4.2M-parameter PyTorch MLP through arcreduce.torch:
#              bench/e2e/torch_step_bench.py --overlap-steps N
# for dense and ARC-Top-K 0.01. Each measures N interleaved compute-only, communication-only and
# overlapped steps (each after a barrier) and reports their medians two ways: each rank's median
# averaged over the ranks, and the median over steps of each step's longest rank (the step time
# of a synchronous job). Prints every command and its output; writes OUT_DIR/raw.txt and
# OUT_DIR/table.md (per round: the three times and overlapped / (compute only + communication
# only), both ways).
#
#   bash scripts/bench-overlap.sh
#   HOSTS=2 RATE=100mbit ROUNDS=1 WORKLOADS=torch-mlp bash scripts/bench-overlap.sh
#
# Environment: HOSTS (4), RATE (1gbit), CPUS (each host's CPU budget in cores; "auto", the
# default, gives the hosts 0.9 of the machine's cores between them; 0: they share the cores),
# ROUNDS (2), STEPS (40 overlap steps per run), WORKLOADS
# ("cpp-mlp torch-mlp"), VARIANTS ("dense arctopk"), RUN_TIMEOUT (300 s per run), BUILD_DIR
# (build/), OUT_DIR (docs/results/overlap), PYTHON (/usr/bin/python3), DATA_DIR (Debian's
# dataset-fashion-mnist). Needs root and network namespaces for the cluster. Exit status: 0 done
# (a failed run is a row marked failed), 1 a build failure, 77 nothing could run.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
out_dir=${OUT_DIR:-$root/docs/results/overlap}
hosts=${HOSTS:-4}
rate=${RATE:-1gbit}
host_cpus=${CPUS:-auto}  # not `cpus`: cluster.env, sourced below, sets that
rounds=${ROUNDS:-2}
steps=${STEPS:-40}
workloads=${WORKLOADS:-cpp-mlp torch-mlp}
variants=${VARIANTS:-dense arctopk}
run_timeout=${RUN_TIMEOUT:-300}
python=${PYTHON:-/usr/bin/python3}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"

if [[ ! -r "$data_dir/train-images-idx3-ubyte.gz" && ! -r "$data_dir/train-images-idx3-ubyte" ]]
then
  echo "bench-overlap: no Fashion-MNIST in $data_dir (apt-get install dataset-fashion-mnist)" >&2
  exit 77
fi
targets=(arcrun train_fashion_mnist)
if [[ " $workloads " == *" torch-mlp "* ]]; then targets+=(arcreduce_torch); fi
bench_build "$build_dir" "${targets[@]}" || exit 1
commit=$(bench_commit "$root")
bench_scratch "$root" arco overlap

status=0
budget_cores=$(bench_host_budget "$hosts" "$host_cpus")
budget_args=()
if [[ -n "$budget_cores" ]]; then budget_args=(--cpus "$budget_cores"); fi
up_log=$(bash "$root/scripts/sim-cluster.sh" up "$hosts" --rate "$rate" "${budget_args[@]}" \
  --name "$name" --dir "$cluster_dir" 2>&1) || status=$?
if ((status == 77)); then
  echo "${up_log//"$cluster_dir"/DIR}" >&2
  echo "bench-overlap: no simulated cluster here (see above)" >&2
  exit 77
fi
((status == 0)) || { echo "$up_log" >&2; exit 1; }
# shellcheck disable=SC1091  # written by `sim-cluster.sh up`
source "$cluster_dir/cluster.env"

mkdir -p "$out_dir"
exec > >(tee "$out_dir/raw.txt") 2>&1
echo "bench-overlap $(date -u '+%Y-%m-%d %H:%M UTC') commit $commit, $(nproc) CPUs, $hosts hosts" \
  "x $rate, $rounds rounds of $steps steps"
echo "${up_log//"$cluster_dir"/DIR}"

# shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
launch=("$build_dir/launcher/arcrun" -np "$hosts" --hostfile "$hostfile" --rsh-agent "$rsh_agent"
        --network-interface "$network" --mpi-args "$mpi_args" -x "PYTHONPATH=$build_dir/python")
results=$dir/results.txt
: >"$results"
for round in $(seq 1 "$rounds"); do
  for workload in $workloads; do
    for variant in $variants; do
      case $workload in
        cpp-mlp)
          compressor=$variant
          program=("$build_dir/examples/03_fashion_mnist/train_fashion_mnist" --epochs 1
                   --train-samples 8192 --test-samples 500 --overlap-steps "$steps"
                   --compressor "$compressor" --data-dir "$data_dir")
          ;;
        torch-mlp)
          program=("$python" "$root/bench/e2e/torch_step_bench.py" --model mlp4m
                   --variant "$variant" --steps 10 --warmup 20 --overlap-steps "$steps"
                   --data-dir "$data_dir")
          ;;
        *)
          echo "bench-overlap: unknown workload '$workload'" >&2
          continue
          ;;
      esac
      echo
      echo "=== round $round, $workload, $variant ==="
      bench_show "${launch[@]}" -- "${program[@]}"
      status=0
      timeout "$run_timeout" "${launch[@]}" -- "${program[@]}" >"$dir/out" 2>&1 || status=$?
      cat "$dir/out"
      # One line per run for the table: round workload variant status, then the three times in
      # ms averaged over the ranks and the three of the longest rank.
      "$python" - "$round" "$workload" "$variant" "$status" "$dir/out" >>"$results" <<'EOF'
import json, re, sys
round_, workload, variant, status, path = sys.argv[1:]
text = open(path).read()
found = None
phases = r"compute only ([\d.]+) ms, communication only ([\d.]+) ms, overlapped step ([\d.]+) ms"
m = re.search(r"overlap +" + phases, text)
slow = re.search(r"longest rank +" + phases, text)
if m and slow:
    found = [float(v) for v in m.groups() + slow.groups()]
keys = ("compute_s", "communication_s", "overlapped_s")
for line in text.splitlines():
    if line.startswith('{"bench": "overlap"'):
        d = json.loads(line)
        found = [1000 * d[k] for k in keys] + [1000 * d["longest_rank"][k] for k in keys]
print(round_, workload, variant, status, *(found or ["-"] * 6))
EOF
      ((status == 0)) || echo "bench-overlap: $workload $variant exited $status"
    done
  done
done

echo
"$python" - "$results" "$out_dir/table.md" "$commit" "$hosts" "$rate" "$steps" <<'EOF'
import sys
results, table, commit, hosts, rate, steps = sys.argv[1:]
names = {"cpp-mlp": "C++ MLP (examples/03)", "torch-mlp": "PyTorch 4.2M MLP (arcreduce.torch)"}
lines = [f"# Overlap of the exchange with backward, {hosts} hosts x {rate}", "",
         f"Commit {commit}; {steps} interleaved steps per run (`bash scripts/bench-overlap.sh`). "
         "Times in ms: each rank's median averaged over the ranks, then (in brackets) the median "
         "over steps of each step's longest rank.", "",
         "| round | workload | variant | compute only | communication only | overlapped | "
         "overlapped / sum, ranks' mean | overlapped / sum, longest rank |",
         "|---|---|---|---|---|---|---|---|"]
for row in open(results):
    round_, workload, variant, status, *ms = row.split()
    if status != "0" or "-" in ms:
        lines.append(f"| {round_} | {names.get(workload, workload)} | {variant} | failed "
                     f"(exit {status}) | | | | |")
        continue
    c, m, o, sc, sm, so = map(float, ms)
    lines.append(f"| {round_} | {names.get(workload, workload)} | {variant} | {c:.1f} ({sc:.1f}) "
                 f"| {m:.1f} ({sm:.1f}) | {o:.1f} ({so:.1f}) | {o / (c + m):.3f} "
                 f"| {so / (sc + sm):.3f} |")
open(table, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
