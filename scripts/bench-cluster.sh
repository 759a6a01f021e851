#!/usr/bin/env bash
# Compressor step time on the simulated cluster (docs/benchmarks.md, "Simulated cluster"): for
# each rate in $RATES (default "1gbit 10gbit") and host count in $HOSTS (default 4), brings up a
# cluster (scripts/sim-cluster.sh, one rank per host, MPI over the shaped TCP links), runs
# bench/compressor_bench on it through arcrun, then unless $DDP=0 PyTorch DDP dense and DDP with
# its PowerSGD hook on the same shapes (bench/ddp/ddp_bench.py, gloo over the same links), and
# removes the cluster. Prints every command and raw output. Arguments go to compressor_bench
# (e.g. --repetitions 10 --ratios 0.01,0.1); $DDP_ARGS to ddp_bench.py.
#
#   bash scripts/bench-cluster.sh --repetitions 10
#   RATES=1gbit HOSTS="2 4 8" DDP=0 bash scripts/bench-cluster.sh --compressors arctopk --ratios 0.01
#
# CPUS: each host's CPU budget in cores ("auto", the default, gives the hosts 0.9 of the machine's
# cores between them; 0: they share the cores).
# Needs root (namespaces); exits 77 where the cluster cannot be built. Builds the two programs in
# $BUILD_DIR (default build/) when that folder is configured, else everything (scripts/build.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
rates=${RATES:-1gbit 10gbit}
host_counts=${HOSTS:-4}
with_ddp=${DDP:-1}
host_cpus=${CPUS:-auto}  # not `cpus`: cluster.env, sourced below, sets that
# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"

if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  build=(cmake --build "$build_dir" -j "$(nproc)" --target arcrun compressor_bench
         gradient_set_shapes)
else
  build=(env BUILD_DIR="$build_dir" bash "$root/scripts/build.sh")
fi
if ! build_log=$("${build[@]}" 2>&1); then
  echo "$build_log" >&2
  exit 1
fi
if [[ "$with_ddp" != 0 ]] && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "bench-cluster: python3-torch is missing: DDP runs skipped (apt-get install python3-torch)" >&2
  with_ddp=0
fi
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown && -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then
  commit+="+dirty"
fi

name=arcc$(($$ % 1000000))
dir=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-bench-cluster.XXXXXX")
cluster_dir=$dir/cluster
trap 'bash "$root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" >/dev/null 2>&1 || true
      rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

# Prints a command as it would be typed (repository prefix dropped, the cluster folder as DIR,
# words with spaces quoted), then runs it.
run() {
  local line='$' word
  for word in "$@"; do
    word=${word#"$root/"}
    word=${word//"$cluster_dir"/DIR}
    [[ "$word" == *[[:space:]]* ]] && word="'$word'"
    line+=" $word"
  done
  echo "$line"
  "$@"
}

for rate in $rates; do
  for hosts in $host_counts; do
    echo
    echo "=== $hosts hosts at $rate ==="
    budget_cores=$(bench_host_budget "$hosts" "$host_cpus")
    budget_args=()
    if [[ -n "$budget_cores" ]]; then budget_args=(--cpus "$budget_cores"); fi
    (cd "$root" && run bash scripts/sim-cluster.sh up "$hosts" --rate "$rate" "${budget_args[@]}" \
      --name "$name" --dir "$cluster_dir")
    # shellcheck disable=SC1091  # written by `sim-cluster.sh up`
    source "$cluster_dir/cluster.env"
    # shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args: from cluster.env
    launch=("$build_dir/launcher/arcrun" -np "$hosts" --hostfile "$hostfile"
            --rsh-agent "$rsh_agent" --network-interface "$network" --mpi-args "$mpi_args")
    case "$rate" in
      *gbit) gbit=${rate%gbit} ;;
      *mbit) gbit=$(awk -v r="${rate%mbit}" 'BEGIN { print r / 1000 }') ;;
      *) gbit=0 ;;
    esac
    run "${launch[@]}" -- "$build_dir/bench/compressor_bench" --commit "$commit" \
      --link-gbit "$gbit" --link "simulated, $rate per host" "$@"
    if [[ "$with_ddp" != 0 ]]; then
      # gloo listens on host 1's address; every host's only interface is eth0.
      master=${network%.0/24}.1
      for variant in dense powersgd; do
        # shellcheck disable=SC2086  # DDP_ARGS: words on purpose
        run "${launch[@]}" -x "MASTER_ADDR=$master" -x GLOO_SOCKET_IFNAME=eth0 -- \
          /usr/bin/python3 "$root/bench/ddp/ddp_bench.py" --variant "$variant" \
          --shapes-tool "$build_dir/bench/gradient_set_shapes" ${DDP_ARGS:-}
      done
    fi
    bash "$root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" >/dev/null
  done
done
