#!/usr/bin/env bash
# Installs the Debian 12 packages arcreduce needs to build and test. Idempotent: asks dpkg what
# is missing and runs apt-get only then. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  cmake make ninja-build g++ git pkg-config  # Ninja: the sanitizer and fuzz builds of listed targets
  openmpi-bin libopenmpi-dev
  libspdlog-dev libcli11-dev
  libgtest-dev libgmock-dev
  clang-format
  clang libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer targets with ASan/UBSan (fuzz/)
  libbenchmark-dev  # bench/kernel_bench
  libthrust-dev     # the kernels' Thrust headers where the CUDA toolkit's CCCL is absent
  gnuplot-nox  # plots of examples/02_robust_shifted_objective and 03_fashion_mnist (--plot)
  zlib1g-dev dataset-fashion-mnist  # examples/03_fashion_mnist: gzip'd IDX files and their reader
  iproute2 util-linux hostname  # scripts/sim-cluster.sh: ip, tc; unshare, flock; hostname
  iptables  # tests/faults: packet loss inside a simulated host (the statistic match)
  nlohmann-json3-dev  # tests/timeline: parses the timeline files
  # bindings/torch (arcreduce.torch) for Debian's Python 3, its tests and examples/04
  python3-torch libtorch-dev pybind11-dev python3-dev python3-pytest
  python3-matplotlib  # bench/e2e/make_report.py: the step-time plot of scripts/bench-e2e.sh
  fortunes  # examples/05_char_transformer: the text corpus of its language model
  # Debian's torch calls the generic libblas.so.3, the slow reference BLAS unless an optimised
  # one provides it: OpenBLAS makes examples/05's transformer step 16x faster (20 -> 1.2 s).
  libopenblas0-pthread
)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if ((EUID != 0)); then sudo=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
