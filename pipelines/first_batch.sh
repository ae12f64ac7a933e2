#!/usr/bin/env bash
# first_batch.sh - what the first batch after an install pays that the next one does not.
#
# Empty on-disk JIT caches (CuPy's kernels, numba's, the CUDA driver's, wasmtime's: fresh folders
# under a temporary directory, through CUPY_CACHE_DIR, NUMBA_CACHE_DIR, CUDA_CACHE_PATH and
# XDG_CACHE_HOME; distprove's own compiled kernels, $DISTPROVE_CACHE_DIR, are kept), then
# `distprove compile`, then the same batch twice, each a fresh `distprove batch` process into a
# fresh output folder. Prints each run's summary line and both proofs/s; the two agree when
# `distprove compile` paid everything the first batch would.
#
#   bash pipelines/first_batch.sh KEY WITNESS_DIR [distprove batch options, e.g. --backend gpu]
#
# PROOFS=N proves N witnesses: WITNESS_DIR's *.wtns in turn, hard-linked (or copied) into a
# temporary folder (4,096 proofs of a key with two witnesses, as pipelines/bench_batch.py stages them).
# COMPILE=0 leaves `distprove compile` out (the gap a first batch pays without it; with
# $DISTPROVE_CACHE_DIR filled beforehand, e.g. by `distprove compile gather witness ntt msm msm_cw
# fixedbase groupfft pairing validate assemble`, which names the modules and so warms nothing else).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,20p' "$0"; exit 2; }
key=$1 witnesses=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CUPY_CACHE_DIR=$tmp/cupy NUMBA_CACHE_DIR=$tmp/numba CUDA_CACHE_PATH=$tmp/nv XDG_CACHE_HOME=$tmp/xdg
mkdir -p "$CUPY_CACHE_DIR" "$NUMBA_CACHE_DIR" "$CUDA_CACHE_PATH" "$XDG_CACHE_HOME"
if [ -n "${PROOFS:-}" ]; then
    mapfile -t src < <(find "$witnesses" -maxdepth 1 -name '*.wtns' | sort)
    [ ${#src[@]} -gt 0 ] || { echo "error: $witnesses: no *.wtns files"; exit 2; }
    mkdir -p "$tmp/witnesses"
    for ((i = 0; i < PROOFS; i++)); do
        f=${src[i % ${#src[@]}]}
        ln "$f" "$tmp/witnesses/w$i.wtns" 2>/dev/null || cp "$f" "$tmp/witnesses/w$i.wtns"
    done
    witnesses=$tmp/witnesses
fi
caches() {  # files in each cache folder
    local d out=""
    for d in cupy numba nv xdg; do out+=" $d $(find "$tmp/$d" -type f | wc -l)"; done
    echo "  cache files after $1:$out"
}
if [ "${COMPILE:-1}" != 0 ]; then
    t0=$(date +%s%N)
    python3 -m distprove.cli compile
    echo "distprove compile: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    caches compile
fi
rates=()
for run in 1 2; do
    t0=$(date +%s%N)
    line=$(python3 -m distprove.cli batch "$key" "$witnesses" --out "$tmp/proofs-$run" "$@" | grep -E '^proved [0-9]+, failed')
    echo "run $run: $line (process $(( ($(date +%s%N) - t0) / 1000000 )) ms)"
    caches "run $run"
    rates+=("$(sed -E 's/.*\(([0-9.]+) proofs\/s.*/\1/' <<<"$line")")
done
echo "first batch ${rates[0]} proofs/s, second ${rates[1]} proofs/s"
