#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# f32 linear at 8..64 rows on a CUDA device (kernels/gpu_linear.hip's
# clustered split-K kernel), in one command from the repository root:
#
#   bash bench/run_linear_f32.sh [tests|bench|sweep|fuse ...]   (default: all four)
#
#   tests  test_gpu_kernels and test_gpu_fused (their logs)
#   bench  bench_kernels.py --only lin32: AUTO (the kernel from 8 rows) beside
#          cuBLAS (BLAS mode) and PyTorch's F.linear (no TF32), same run:
#          linear-f32.json
#   sweep  AUTO with each split and slice depth forced (GFXGRAPH_LINEAR_MID=S:BK)
#   fuse   bench_fuse.py (the daemon's MLPs beside torch CUDA graphs) with the
#          kernel off (GFXGRAPH_LINEAR_MID=0, fuse-mid0.json) and on (fuse.json)
#
# Builds only the targets it needs in a CUDA tree ($GG_BUILD_DIR, default
# build-lin32; Ninja, sm_90).  Output in $OUT (default ./out-lin32).
set -u
cd "$(dirname "$0")/.." || exit 1
B=${GG_BUILD_DIR:-build-lin32}
OUT=${OUT:-$PWD/out-lin32}
mkdir -p "$OUT"
steps=${*:-tests bench sweep fuse}
commit=${GFXGRAPH_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
targets=(bench_kernels test_gpu_kernels test_gpu_fused)
case " $steps " in *" fuse "*) targets+=(gfxgraphd gfxgraphctl gfxgraph-client) ;; esac
nvcc_arg=()
command -v nvcc >/dev/null 2>&1 || nvcc_arg=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
{
    cmake -S . -B "$B" -G Ninja -DGFXGRAPH_GPU=cuda -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo ${nvcc_arg[@]+"${nvcc_arg[@]}"} &&
        cmake --build "$B" -j "$(nproc)" --target "${targets[@]}"
} >"$OUT/setup.log" 2>&1 || { tail -40 "$OUT/setup.log"; exit 1; }
rc=0
for s in $steps; do
    case $s in
    tests)
        for t in test_gpu_kernels test_gpu_fused; do
            "$B/tests/$t" >"$OUT/$t.log" 2>&1
            r=$?
            [ $r -eq 0 ] || rc=1
            echo "$t: exit $r: $(grep -E '[0-9]+ passed, [0-9]+ failed' "$OUT/$t.log" | tail -1)"
            grep -E '^FAIL' "$OUT/$t.log" | head -20
        done
        ;;
    bench)
        python3 bench/bench_kernels.py --bin "$B/bench/bench_kernels" --only lin32 \
            --commit "$commit" --out "$OUT/linear-f32.json" >"$OUT/bench.log" 2>&1 || rc=1
        sed -n '/^copy ceiling .*torch copy_/,$p' "$OUT/bench.log"
        ;;
    sweep)
        for v in 2:32 4:32 8:32 16:32 2:64 4:64 8:64 16:64; do
            echo "== GFXGRAPH_LINEAR_MID=$v"
            GFXGRAPH_LINEAR_MID=$v "$B/bench/bench_kernels" --only lin32-auto --trials 9 |
                awk '/^linear/ {printf "M %s N %s K %s %s us\n", $3, $5, $7, $11}'
        done 2>&1 | tee "$OUT/sweep.log"
        ;;
    fuse)
        # before (GFXGRAPH_LINEAR_MID=0: cuBLAS / cuBLASLt as before the
        # kernel) and after, one after the other in the same command
        for v in 0 ""; do
            f=fuse${v:+-mid$v}
            GFXGRAPH_LINEAR_MID=$v python3 bench/bench_fuse.py --build "$B" --json "$OUT/$f.json" \
                --commit "$commit" >"$OUT/$f.log" 2>&1 || rc=1
            echo "== $f (GFXGRAPH_LINEAR_MID=${v:-unset})"
            grep -E '^(decode_chain|mlp_)' "$OUT/$f.log"
        done
        ;;
    esac
done
exit $rc
