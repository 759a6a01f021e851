#!/usr/bin/env bash
# The step model beyond this machine (docs/scaling.md): from examples/03's training steps on the
# simulated cluster (bench-e2e.sh's floor, dense, arctopk, topk, oktopk and powersgd rows, with
# every collective's calls and bytes), bench/model/step_model.py checks the model against each
# measured step and projects each compressor's step to 64 and 256 nodes; it writes
# OUT_DIR/model.md (both tables) and docs/img/step-model.png.
#
#   bash scripts/step-model.sh              the tables and plot from the stored measurements
#   MEASURE=1 bash scripts/step-model.sh    measure first (about 40 minutes on 2 cores)
#
# Environment: MEASURE (0), HOSTS ("2 4 8"), RATES ("100mbit 1gbit"), PASSES (2), OUT_DIR
# (docs/results/step-model), PYTHON (/usr/bin/python3: Debian's, with matplotlib).
# Exit status: 0 done, 1 a failure, 77 no simulated cluster here (MEASURE=1).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out_dir=${OUT_DIR:-$root/docs/results/step-model}
python=${PYTHON:-/usr/bin/python3}
if [[ "${MEASURE:-0}" != 0 ]]; then
  HOSTS=${HOSTS:-2 4 8} RATES=${RATES:-100mbit 1gbit} WORKLOADS=cpp-mlp \
    VARIANTS="floor dense arctopk topk oktopk powersgd" PASSES=${PASSES:-2} BUDGET=10 STEPS=20 \
    OUT_DIR="$out_dir" bash "$root/scripts/bench-e2e.sh"
fi
"$python" "$root/bench/model/step_model.py" report "$out_dir/results.jsonl" --out "$out_dir" \
  --plot "$root/docs/img/step-model.png"
