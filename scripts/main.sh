#!/usr/bin/env bash
# Installs what is missing, builds, and trains examples/03_fashion_mnist on 4 local ranks through
# arcrun: an MLP on Fashion-MNIST whose gradients arcreduce compresses (the runtime's default
# compressor, ARC-Top-K) and averages while backward runs, with one line per epoch and a summary
# (test accuracy, step time, bytes per step, share of the communication hidden behind backward).
# A few minutes on 2 cores. Arguments go to the example (e.g. --epochs 1, --compressor dense,
# --compare); examples/01_reduce_model is built too and runs with the same launcher.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
ranks=${RANKS:-4}

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

# Containers often forbid cross-memory attach; Open MPI then needs plain shared-memory copies.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
cmd=("$build_dir/launcher/arcrun" -np "$ranks" --
  "$build_dir/examples/03_fashion_mnist/train_fashion_mnist" "$@")
echo "main: ${cmd[*]}"
exec "${cmd[@]}"
