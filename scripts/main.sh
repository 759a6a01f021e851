#!/usr/bin/env bash
# Installs what is missing, builds, and runs examples/01_reduce_model on 4 local ranks through
# arcrun: a ~24M-parameter gradient set reduced by the runtime, verified, with a summary.
# Arguments go to the example (e.g. --steps 10 --compressor none).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
ranks=${RANKS:-4}

bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

# Containers often forbid cross-memory attach; Open MPI then needs plain shared-memory copies.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
cmd=("$build_dir/launcher/arcrun" -np "$ranks" -- "$build_dir/examples/01_reduce_model/reduce_model" "$@")
echo "main: ${cmd[*]}"
exec "${cmd[@]}"
