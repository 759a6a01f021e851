#!/usr/bin/env bash
# Measures the simulated cluster's link: brings up $HOSTS (4) hosts at $RATE (1gbit) per host and
# direction, $DELAY one way if set (scripts/sim-cluster.sh), runs bench/link_bench on them through
# arcrun (one rank per host, MPI over TCP), and removes the cluster. Prints each command and
# link_bench's table (docs/design/simulated-cluster-link-measurement.md records them). Needs root;
# exits 77 where the cluster cannot be built. Arguments go to link_bench, e.g. --repetitions 20;
# $EXTRA_MPI_ARGS go to mpirun after the cluster's own (e.g. an Open MPI allreduce algorithm, see
# docs/design/simulated-cluster-link-measurement.md).
#
#   bash scripts/bench-link.sh                      # 100 MB allreduce, 4 hosts, 1 Gbit/s
#   RATE=100gbit bash scripts/bench-link.sh         # the same with the link out of the way
#
# Builds arcrun and link_bench in $BUILD_DIR (default build/) when that folder is configured,
# else configures and builds everything there (scripts/build.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
hosts=${HOSTS:-4}
rate=${RATE:-1gbit}
delay=${DELAY:-}

# shellcheck source=scripts/bench-common.sh
source "$root/scripts/bench-common.sh"
bench_build "$build_dir" arcrun link_bench || exit 1
commit=$(bench_commit "$root")

name=arcb$(($$ % 1000000))
dir=$(mktemp -d "${TMPDIR:-/tmp}/arcreduce-bench-link.XXXXXX")
cluster_dir=$dir/cluster
trap 'bash "$root/scripts/sim-cluster.sh" down --name "$name" --dir "$cluster_dir" >/dev/null 2>&1 || true
      rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

up=(bash scripts/sim-cluster.sh up "$hosts" --rate "$rate" ${delay:+--delay "$delay"}
    --name "$name" --dir "$cluster_dir")
echo "\$ ${up[*]//"$cluster_dir"/DIR}"
(cd "$root" && "${up[@]}")
# shellcheck disable=SC1091  # written by `sim-cluster.sh up`
source "$cluster_dir/cluster.env"

# shellcheck disable=SC2154  # hostfile, rsh_agent, network, mpi_args, rate_bps: from cluster.env
cmd=("$build_dir/launcher/arcrun" -np "$hosts" --hostfile "$hostfile" --rsh-agent "$rsh_agent"
     --network-interface "$network" --mpi-args "$mpi_args${EXTRA_MPI_ARGS:+ $EXTRA_MPI_ARGS}" --
     "$build_dir/bench/link_bench" --rate-bps "$rate_bps" --commit "$commit" "$@")
# The command as it would be typed: the repository prefix dropped, the temporary cluster folder
# shown as DIR, words with spaces quoted.
line='$'
for word in "${cmd[@]}"; do
  word=${word#"$root/"}
  word=${word//"$cluster_dir"/DIR}
  [[ "$word" != *" "* ]] || word="'$word'"
  line+=" $word"
done
echo "$line"
"${cmd[@]}"
