#!/usr/bin/env bash
# Configures and builds arcreduce into $BUILD_DIR (default: build/ at the repository root).
# CUDA is enabled when nvcc is on PATH or at $CUDA_HOME/bin/nvcc (default /usr/local/cuda), so
# the CUDA code compiles wherever the toolkit is installed, with or without a GPU.
# Extra arguments go to the configure step (e.g. -DARCREDUCE_CUDA=OFF).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
build_type=${BUILD_TYPE:-RelWithDebInfo}

configure=(-S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type")
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
if [[ -x "$nvcc" ]]; then
  configure+=(-DCMAKE_CUDA_COMPILER="$nvcc")
  echo "build: CUDA toolkit found ($nvcc)"
elif command -v nvcc >/dev/null; then
  echo "build: CUDA toolkit found ($(command -v nvcc))"
else
  echo "build: no CUDA toolkit, building the CPU path only"
fi

cmake "${configure[@]}" "$@"
cmake --build "$build_dir" -j "$(nproc)"
