#!/usr/bin/env bash
# The checks that need a GPU, on a machine with one: gpu_tests (the device path, NCCL with one
# rank), kernels_cuda_link_check, the CUDA copy and kernel benchmarks (the kernel benchmark also
# compares top_k_rows' two selections from 768 to 2^24 rows) and, where compute-sanitizer is
# installed, memcheck over the GPU tests and initcheck over the kernels. Runs what a CUDA build
# in $BUILD_DIR (default build/, configured with ARCREDUCE_CUDA=ON) has already built; it builds
# nothing, so it also runs on a GPU machine without the build's dependencies when
# LD_LIBRARY_PATH finds their libraries. Writes every program's output to the folder given as
# argument (default gpu-check/) and prints a summary. Exits 77 without a usable GPU, 1 if a
# check failed.
#
#   bash scripts/gpu-check.sh                     # results in gpu-check/
#   bash scripts/gpu-check.sh /tmp/gpu-results
#
# compute-sanitizer also reports NCCL's own probing of kernel images for other architectures
# (cudaErrorNoKernelImageForDevice inside ncclInitKernelsForDevice, docs/cuda.md); the summary
# counts the reports that do not come from NCCL.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
out=${1:-gpu-check}
mkdir -p "$out"

programs=("$build_dir/tests/cuda/gpu_tests" "$build_dir/tests/kernels/kernels_cuda_link_check"
  "$build_dir/bench/cuda_copy_bench" "$build_dir/bench/cuda_kernel_bench")
for p in "${programs[@]}"; do
  if [[ ! -x "$p" ]]; then
    echo "gpu-check: $p is missing: build with ARCREDUCE_CUDA=ON first (scripts/build.sh)" >&2
    exit 1
  fi
done
if ! nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
  > "$out/device.txt" 2>&1; then
  echo "gpu-check: no usable GPU (nvidia-smi: $(head -1 "$out/device.txt"))" >&2
  exit 77
fi
echo "device: $(cat "$out/device.txt")"

failed=0
run() {  # run NAME TIMEOUT COMMAND...: output to $out/NAME.txt, one summary line
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  printf '%-26s exit %d in %d s\n' "$name" "$rc" $((SECONDS - start))
  if ((rc != 0)); then
    failed=1
    tail -5 "$out/$name.txt"
  fi
}

run gpu_tests 300 "$build_dir/tests/cuda/gpu_tests" --gtest_output="xml:$out/gpu_tests.xml"
grep -E '^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+ test' "$out/gpu_tests.txt"
run kernels_cuda_link_check 60 "$build_dir/tests/kernels/kernels_cuda_link_check"
cat "$out/kernels_cuda_link_check.txt"
run cuda_copy_bench 120 "$build_dir/bench/cuda_copy_bench"
run cuda_kernel_bench 300 "$build_dir/bench/cuda_kernel_bench" \
  --select-rows 768 3072 16384 65536 262144 1048576 4194304 16777216
if grep -q "nothing measured" "$out/cuda_kernel_bench.txt"; then
  echo "gpu-check: the benchmarks found no device: $(head -1 "$out/cuda_kernel_bench.txt")" >&2
  exit 77
fi

# sanitize NAME TOOL PROGRAM ARGS...: a compute-sanitizer tool over a program; fails the check on
# any report that is not NCCL's probe.
sanitize() {
  local name=$1 tool=$2
  shift 2
  run "$name" 600 compute-sanitizer --tool "$tool" "$@"
  local reports nccl
  reports=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$out/$name.txt")
  reports=${reports:-0}
  # A report's first frame is two lines below its "Program hit" line.
  nccl=$(grep -A2 '^========= Program hit' "$out/$name.txt" |
    grep -c 'Host Frame: ncclInitKernelsForDevice' || true)
  echo "$name: $reports report(s), $nccl of them NCCL's kernel-image probe"
  if ((reports > nccl)); then failed=1; fi
}

if command -v compute-sanitizer > /dev/null; then
  # memcheck over every GPU test; initcheck (reads of memory never written: the kernels' pooled
  # scratch) over the kernel tests and one round of the kernel benchmark, whose selections
  # above 2^20 rows take the sampled path.
  sanitize memcheck memcheck --leak-check no "$build_dir/tests/cuda/gpu_tests"
  sanitize initcheck initcheck "$build_dir/tests/cuda/gpu_tests" \
    --gtest_filter='GpuArcTopK*:GpuArcTopKPlan*:GpuGaussian*:GpuScores*'
  sanitize initcheck_bench initcheck "$build_dir/bench/cuda_kernel_bench" --repetitions 1 \
    --warmup 0 --no-per-tensor --select-rows 768 3072 2000000
else
  echo "compute-sanitizer: not installed, memcheck and initcheck skipped"
fi
exit "$failed"
