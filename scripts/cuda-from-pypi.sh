#!/usr/bin/env bash
# Prepares a CUDA 13.0 toolkit from NVIDIA's PyPI wheels, for building `laq --features cuda`
# on a machine without a system CUDA install (and without a GPU). Prints the environment
# to source before `cargo build`.
#
#   scripts/cuda-from-pypi.sh DIR [COMPUTE_CAP]   # e.g. DIR=$HOME/cuda-13, 90 for H100/H200
#   . DIR/env.sh
#   cargo build --release -p laq --features cuda
set -euo pipefail
dir=${1:?usage: cuda-from-pypi.sh DIR [COMPUTE_CAP]}
cap=${2:-90}
mkdir -p "$dir/wheels"
dir=$(cd "$dir" && pwd)
for spec in "nvidia-cuda-nvcc>=13.0,<13.1" "nvidia-nvvm>=13.0,<13.1" \
    "nvidia-cuda-runtime>=13.0,<13.1" "nvidia-cuda-crt>=13.0,<13.1" \
    "nvidia-cuda-cccl>=13.0,<13.1" "nvidia-cuda-nvrtc>=13.0,<13.1" \
    "nvidia-cublas>=13.0,<13.1" "nvidia-curand>=10.4,<10.5"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$dir/wheels" "$spec"
done
for w in "$dir"/wheels/*.whl; do unzip -qo "$w" -d "$dir/unpacked"; done
home="$dir/unpacked/nvidia/cu13"
(
  cd "$home/lib"
  for l in cudart nvrtc cublas cublasLt; do ln -sf "lib$l.so.13" "lib$l.so"; done
  ln -sf libcurand.so.10 libcurand.so
)
# The wheels carry no libcuda (it comes with the driver). For linking only, a library of
# empty functions with the driver API's names stands in; at run time the driver's real
# libcuda.so.1 is loaded instead.
mkdir -p "$home/lib/stubs"
grep -oE '\bcu[A-Z][A-Za-z0-9_]*\b' "$home/include/cuda.h" | sort -u \
  | awk '{print "void " $1 "(void) {}"}' > "$dir/libcuda-link.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$home/lib/stubs/libcuda.so" "$dir/libcuda-link.c"
cat > "$dir/env.sh" <<ENV
export CUDA_HOME=$home
export PATH=$home/bin:\$PATH
export CUDA_COMPUTE_CAP=$cap
export LIBRARY_PATH=$home/lib:$home/lib/stubs
export NVCC_APPEND_FLAGS="-I$home/include/cccl"
ENV
echo "toolkit in $home; now: . $dir/env.sh"
