#!/usr/bin/env bash
# Regenerates the benchmark report (docs/benchmarks.md, "Report"): runs every measurement, keeps
# the raw outputs in $OUT (default docs/results/) and writes the tables (report.md) and plots
# (step-time.png, scaling.png, accuracy.png) beside them with bench/report/make_report.py.
#
# Stages ($STAGES, default "local cluster scaling accuracy"; "report" only redraws):
#   local     compressor_bench, 4 ranks on this host (shared memory)     -> local.txt
#             ARC-Top-K 0.01 with ef14, none and ef21m                   -> default-ef-speed.txt
#   cluster   4 hosts at 1 and 10 Gbit/s, PyTorch DDP dense and PowerSGD -> cluster.txt
#   scaling   2 and 8 hosts at 1 Gbit/s, dense, Top-K and ARC-Top-K 0.01  -> scaling.txt
#   accuracy  Fashion-MNIST --compare on 4 ranks, seeds $SEEDS (0 1), with ef14 and with no error
#             feedback for the sparsifiers                   -> accuracy-<ef>-seed<s>.{csv,txt}
#             then ARC-Top-K (ef14, none), dense, Rand-K + ef14 on all 60,000 training examples
#                                                     -> accuracy-full-<compressor>-<ef>-seed<s>.txt
# $REPS (5) timed and $WARMUP (3) untimed steps per variant; $EPOCHS (3) epochs of the first
# $TRAIN_SAMPLES (30000) training examples per training run.
# The cluster stages need root (network namespaces) and say so when they cannot run. About 45
# minutes on a quiet 2-core machine.
#
#   bash scripts/bench-report.sh
#   STAGES="cluster" REPS=3 bash scripts/bench-report.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
out=${OUT:-$root/docs/results}
stages=${STAGES:-local cluster scaling accuracy}
reps=${REPS:-5}
warmup=${WARMUP:-3}
epochs=${EPOCHS:-3}
seeds=${SEEDS:-0 1}
train_samples=${TRAIN_SAMPLES:-30000}

mkdir -p "$out"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  BUILD_DIR="$build_dir" bash "$root/scripts/build.sh"
fi
cmake --build "$build_dir" -j "$(nproc)" --target arcrun compressor_bench gradient_set_shapes \
  train_fashion_mnist >/dev/null
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown && -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then
  commit+="+dirty"
fi

# Runs a stage's command with its output in FILE (and on the terminal), the command line and
# the load average first.
record() {
  local file=$1
  shift
  {
    echo "\$ ${*//"$root/"/}"
    echo "date $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    "$@" 2>&1
  } | sed "s|$root/||g" | tee "$out/$file"
}

bench_args=(--repetitions "$reps" --warmup "$warmup")  # bench-cluster.sh adds --commit itself
for stage in $stages; do
  case "$stage" in
    local)
      record local.txt "$build_dir/launcher/arcrun" -np 4 -- "$build_dir/bench/compressor_bench" \
        "${bench_args[@]}" --commit "$commit"
      # ARC-Top-K's step under each error feedback (the default's evidence, docs/results/compressor-defaults.md)
      record default-ef-speed.txt "$build_dir/launcher/arcrun" -np 4 -- \
        "$build_dir/bench/compressor_bench" "${bench_args[@]}" --commit "$commit" \
        --compressors arctopk --arctopk-error-feedback ef14,none,ef21m --ratios 0.01
      ;;
    cluster)
      record cluster.txt env RATES="1gbit 10gbit" HOSTS=4 BUILD_DIR="$build_dir" \
        DDP_ARGS="--repetitions $reps --warmup $warmup" \
        bash "$root/scripts/bench-cluster.sh" "${bench_args[@]}"
      ;;
    scaling)
      record scaling.txt env RATES=1gbit HOSTS="2 8" DDP=0 BUILD_DIR="$build_dir" \
        bash "$root/scripts/bench-cluster.sh" "${bench_args[@]}" --compressors topk,arctopk \
        --ratios 0.01
      ;;
    accuracy)
      # Every compressor with the example's error feedback (ef14 for the sparsifiers), then the
      # sparsifiers again without error feedback.
      for seed in $seeds; do
        for ef in ef14 none; do
          list=dense,topk,randk,arctopk,oktopk,powersgd
          [[ "$ef" == none ]] && list=topk,randk,arctopk
          record "accuracy-$ef-seed$seed.txt" "$build_dir/launcher/arcrun" -np 4 -- \
            "$build_dir/examples/03_fashion_mnist/train_fashion_mnist" --compare \
            --compare-list "$list" --error-feedback "$ef" --epochs "$epochs" \
            --train-samples "$train_samples" --seed "$seed" --overlap-steps 0 \
            --csv "$out/accuracy-$ef-seed$seed.csv"
        done
      done
      # The deciding runs for the default error feedback: all 60,000 examples, ARC-Top-K with
      # ef14 and without, next to dense and Rand-K + ef14.
      for seed in $seeds; do
        for run in "arctopk ef14" "arctopk none" "dense none" "randk ef14"; do
          set -- $run
          record "accuracy-full-$1-$2-seed$seed.txt" "$build_dir/launcher/arcrun" -np 4 -- \
            "$build_dir/examples/03_fashion_mnist/train_fashion_mnist" --compressor "$1" \
            --error-feedback "$2" --epochs "$epochs" --seed "$seed" --overlap-steps 0
        done
      done
      ;;
    report) ;;
    *)
      echo "bench-report: unknown stage '$stage' (local, cluster, scaling, accuracy, report)" >&2
      exit 2
      ;;
  esac
done
/usr/bin/python3 "$root/bench/report/make_report.py" "$out"
