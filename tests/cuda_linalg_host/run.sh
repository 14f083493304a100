#!/bin/bash
# run.sh - a host check of the CUDA backend's linalg slots, for machines
# without a GPU: backend/cuda/linalg.cu, linalg_decomp.cu and linalg_util.cuh
# are compiled by g++ (kernel launches become sequential calls, kernels run
# one thread) against mock/ (cuda_common.cuh, cuSOLVER and cuBLAS on reference
# LAPACK/BLAS, every library call's memory footprint checked against the live
# allocations), with ASan/UBSan, and test.cpp checks every slot in float and
# double. It verifies layouts, leading dimensions, job choices, edge cases,
# the error word and the slots' shared view checks (backend/check/linalg.c);
# not CUDA itself (races, streams, cuSOLVER's own numerics).
# Needs g++ and liblapack/libblas (Debian: liblapack-dev). Not part of CI.
#   bash tests/cuda_linalg_host/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/src"
cp "$here/mock/cuda_common.cuh" "$out/src/"
for f in linalg_util.cuh linalg.cu linalg_decomp.cu; do # drop the <<<grid, block, shmem, stream>>> of launches
  python3 -c "import re,sys; print(re.sub(r'<<<.*?>>>', '', open(sys.argv[1]).read(), flags=re.S), end='')" \
    "$root/backend/cuda/$f" > "$out/src/$f"
done
flags=(-std=c++17 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -Wall -Wno-unused-function
       -Wno-unused-variable -I "$out/src" -I "$here/mock" -I "$root/core" -I "$root/backend" -I "$root/autograd")
g++ "${flags[@]}" -x c++ -c "$out/src/linalg.cu" -o "$out/linalg.o"
g++ "${flags[@]}" -x c++ -c "$out/src/linalg_decomp.cu" -o "$out/linalg_decomp.o"
g++ "${flags[@]}" -c "$here/mock.cpp" -o "$out/mock.o"
g++ "${flags[@]}" -c "$here/test.cpp" -o "$out/test.o"
# the slots' shared view checks (run by the dispatcher before the kernel; test.cpp calls them itself)
gcc -std=c11 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -Wall -I "$here/mock" \
    -I "$root/core" -I "$root/backend" -I "$root/autograd" -c "$root/backend/check/linalg.c" -o "$out/check_linalg.o"
g++ -fsanitize=address,undefined "$out"/*.o -llapack -lblas -o "$out/check"
"$out/check"
