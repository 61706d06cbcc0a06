#!/usr/bin/env bash
# Compiles the CUDA kernels (infer/backend/cuda/kernels/*.cu, one file per
# family) to PTX for compute_80 (Ampere: A100, the sm_8x cards) and
# compute_90 (Hopper: H100, H200) with Debian's CUDA 11.8 nvcc, and checks
# that each PTX assembles with ptxas for sm_80 and sm_90. The PTX is
# committed and embedded in the binary (infer/backend/cuda/ptx.go); the
# driver JIT-compiles it for the GPU at run time, so users need only the
# NVIDIA driver.
#
#   scripts/build-ptx.sh          regenerate infer/backend/cuda/kernels/ptx/
#   scripts/build-ptx.sh --check  regenerate into a temporary folder and fail
#                                 when it differs from the committed PTX
#   PTX_OUT=dir scripts/build-ptx.sh   write into dir instead
#
# Toolkit: apt-get install nvidia-cuda-toolkit (components contrib non-free).
set -euo pipefail
cd "$(dirname "$0")/.."
src=infer/backend/cuda/kernels
out=${PTX_OUT:-$src/ptx}
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
NVCC=${NVCC:-nvcc}
PTXAS=${PTXAS:-ptxas}
for tool in "$NVCC" "$PTXAS"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build-ptx: $tool not found (apt-get install nvidia-cuda-toolkit)" >&2
    exit 2
  fi
done
mkdir -p "$out"
for cu in "$src"/*.cu; do
  name=$(basename "$cu" .cu)
  for arch in 80 90; do
    ptx="$out/$name.sm_$arch.ptx"
    # -lineinfo off and no -G: the PTX depends on the sources and the
    # compiler alone (no paths, no dates), so --check can compare bytes.
    "$NVCC" -std=c++14 -O3 -arch=compute_$arch --ptx -I"$src" -o "$ptx" "$cu"
    # The PTX must assemble for the real architectures it targets.
    "$PTXAS" -arch=sm_$arch -o /dev/null "$ptx"
  done
done
if [ $check = 1 ]; then
  if ! diff -r "$src/ptx" "$out" >/dev/null; then
    echo "build-ptx: $src/ptx differs from what the sources compile to: run scripts/build-ptx.sh and commit" >&2
    diff -r "$src/ptx" "$out" | head -20 >&2
    exit 1
  fi
  echo "build-ptx: committed PTX matches the sources (nvcc $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
else
  echo "build-ptx: wrote $(ls "$out"/*.ptx | wc -l) PTX files to $out"
fi
