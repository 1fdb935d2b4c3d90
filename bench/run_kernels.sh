#!/bin/bash
# SPDX-License-Identifier: MIT
# The kernel bench on a GPU machine, from the repository root: configure a
# CUDA tree (or use BUILD_DIR's), build only the kernels, bench_kernels and
# the two kernel test programs, run the kernel tests, then bench_kernels and
# PyTorch's kernels side by side (bench/bench_kernels.py):
#
#   bench/run_kernels.sh [BUILD_DIR] [OUT_DIR] [bench_kernels.py args...]
#
# BUILD_DIR (default build-kern): configured here with Ninja, GFXGRAPH_GPU=cuda
# and sm_90 when it has no CMakeCache.txt.  OUT_DIR (default bench/results):
# kernels-<gpu>-<date>.json, plus the test and bench logs when OUT_DIR is not
# bench/results.  GG_KERNEL_TESTS=0 skips the tests.  Exit: 0 done, 1 a build,
# test or bench failed, 77 no torch/CUDA.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=${1:-$src/build-kern}
shift || true
outdir=${1:-$here/results}
shift || true
mkdir -p "$outdir"
py=${PYTHON:-python3}
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: torch with a CUDA device is not available to $py"; exit 77; }
gpu=$("$py" -c 'import torch; print(torch.cuda.get_device_name(0).split()[1].lower())' 2>/dev/null)
commit=${GFXGRAPH_GIT_COMMIT:-$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)}
jobs=$(nproc 2>/dev/null || echo 4)
logs=$outdir
[ "$outdir" = "$here/results" ] && logs=$(mktemp -d /tmp/ggkernbench.XXXXXX)

if [ ! -f "$build/CMakeCache.txt" ]; then
    nvcc_arg=()
    command -v nvcc >/dev/null 2>&1 || [ ! -x /usr/local/cuda/bin/nvcc ] ||
        nvcc_arg=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
    cmake -S "$src" -B "$build" -G Ninja -DGFXGRAPH_GPU=cuda -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo ${nvcc_arg[@]+"${nvcc_arg[@]}"} >"$logs/configure.log" 2>&1 ||
        { tail -30 "$logs/configure.log"; exit 1; }
fi
cmake --build "$build" -j "$jobs" --target bench_kernels test_gpu_kernels test_gpu_decode \
    >"$logs/build.log" 2>&1 || { tail -40 "$logs/build.log"; exit 1; }

rc=0
if [ "${GG_KERNEL_TESTS:-1}" != 0 ]; then
    for t in test_gpu_kernels test_gpu_decode; do
        "$build/tests/$t" >"$logs/$t.log" 2>&1
        r=$?
        echo "$t: exit $r, $(tail -1 "$logs/$t.log")"
        grep '^FAIL' "$logs/$t.log" | head -20
        [ $r -eq 0 ] || rc=1
    done
fi

out=$outdir/kernels-${gpu:-gpu}-$(date -u +%Y-%m-%d).json
"$py" "$here/bench_kernels.py" --bin "$build/bench/bench_kernels" --out "$out" \
    --commit "$commit" "$@" || rc=1
echo "results: $out"
exit $rc
