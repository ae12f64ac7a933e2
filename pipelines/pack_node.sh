#!/usr/bin/env bash
# Packs node and snarkjs 0.7.6 for the GPU machine, whose image has no node, into ./.nodecarry
# (git-ignored): node.tar.xz (this machine's node binary and ./node_modules without wasmcurves'
# tests, ~26 MB) and the wasmtime wheel, so that a device run can time snarkjs's witness
# calculation beside distprove's on that host (pipelines/bench_witnessgen.py) and run
# `snarkjs groth16 verify` there. pipelines/device_run.sh unpacks it when it is carried:
#   carry [".nodecarry", ".kcarry"] (not with .whl: the three exceed the device tool's 64 MiB),
#   WTNS_CIRCUITS="..." SKIP="compile tests kernels keys e2e ptau batch" bash pipelines/device_run.sh
# Needs node on PATH, `npm install --no-save snarkjs@0.7.6` done here, and .whl filled by
# pipelines/fetch_wheels.sh (for its wasmtime wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.nodecarry/' .git/info/exclude 2>/dev/null || echo '/.nodecarry/' >> .git/info/exclude
[ -x node_modules/.bin/snarkjs ] || { echo "no node_modules/.bin/snarkjs: npm install --no-save snarkjs@0.7.6" >&2; exit 1; }
wheel=$(ls .whl/wasmtime-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "no .whl/wasmtime-*.whl: bash pipelines/fetch_wheels.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" .nodecarry
cp "$(readlink -f "$(command -v node)")" "$work/bin/node"
tar -cf - --exclude='wasmcurves/test' --exclude='*.md' --exclude='*.map' node_modules | tar -xf - -C "$work"
tar -cf - -C "$work" bin node_modules | xz -T0 -9 > .nodecarry/node.tar.xz
cp "$wheel" .nodecarry/
echo "node $(node --version), $(du -sh .nodecarry | cut -f1) in .nodecarry"
