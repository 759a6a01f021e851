#!/usr/bin/env bash
# Runs Horovod's own PyTorch test file (test/parallel/test_torch.py of a Horovod checkout) against
# arcreduce.torch through shim/ (Horovod's names mapped onto arcreduce.torch), in one mpirun job,
# and prints pytest's summary. Not part of the suite: Horovod's code is not in this repository.
#   tests/horovod_parity/run.sh HOROVOD_CHECKOUT [RANKS (2)] [pytest args...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
horovod=${1:?usage: run.sh HOROVOD_CHECKOUT [RANKS] [pytest args...]}
ranks=${2:-2}
shift $(($# >= 2 ? 2 : 1))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$root/${BUILD_DIR:-build}/python:$here/shim"
export ARCREDUCE_STALL_CHECK_SECONDS=10 ARCREDUCE_STALL_SHUTDOWN_SECONDS=60
cd "$horovod/test/parallel"
exec mpirun --oversubscribe --bind-to none -np "$ranks" "${PYTHON:-/usr/bin/python3}" -m pytest -p no:cacheprovider \
  --color=no -q -rfEs "$@" test_torch.py
