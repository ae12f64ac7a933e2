#!/usr/bin/env bash
# pack_native.sh - what batches from inputs and `wtns calculate` with native witness generators
# need on the GPU machine, which has neither node nor a C++ toolchain:
#   .kcarry/circuits.txz  bench/circuits/sha256_32 (the SHA-256 fixture's wasm and circom --c
#                         folder, its r1cs compiled here with circom2 from npm, so the benchmark
#                         makes a dev key there, and 16 random inputs), bench/circuits/native/
#                         (circom --c folders of the Merkle, Poseidon, bits and 1k-chain fixtures:
#                         the first two unpacked from tests/data, the others compiled here) and the
#                         chains of pipelines/make_bench_circuit.sh (mul_chain_64k with its r1cs for
#                         a dev key; mul_chain_256k and _1024k, when built, without it: witnesses only)
#   .kcarry/native.txz    the native drivers of those folders, built here (static binaries) into a
#                         cache folder (distprove/witness/native.py keys a build by the folder's
#                         content, distprove's driver source and the build flags, so the same tree
#                         finds them there)
# pipelines/device_run.sh unpacks both. Then, e.g.:
#   INPUT_CIRCUITS="bench/circuits/sha256_32" INPUT_ARGS="--workers 1 --copies 64 --reps 2 \
#     --gen native=bench/circuits/sha256_32/sha256_32_cpp" SKIP="compile tests kernels keys e2e ptau batch" \
#     bash pipelines/device_run.sh
# Needs npm (circom2 and circomlib go to $WORK, default a temporary folder), g++, make, nasm,
# libgmp-dev and nlohmann-json3-dev. CHAINS="65533 262141 1048573" (the default: 65533) names the
# chains built when bench/circuits lacks them (circom2 on 2 cores: ~10 s at 2^16, ~2 min at 2^18, 28 min at 2^20).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.kcarry/' .git/info/exclude 2>/dev/null || echo '/.kcarry/' >> .git/info/exclude
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK" .kcarry bench/circuits/sha256_32/inputs bench/circuits/native
if [ ! -x "$WORK/node_modules/.bin/circom2" ]; then
    (cd "$WORK" && npm init -y >/dev/null && npm install --no-audit --no-fund circom2 circomlib >/dev/null)
fi
cp -r "$WORK/node_modules/circomlib" "$WORK/" 2>/dev/null || true  # circom2's WASI sandbox sees only its folder
cp tests/data/circuits/sha256_32.circom "$WORK/"
(cd "$WORK" && node_modules/.bin/circom2 sha256_32.circom --r1cs --O2 -l . -o .)  # --O2: as the fixture's wasm (tests/data/regenerate.sh)
d=bench/circuits/sha256_32
cp "$WORK/sha256_32.r1cs" $d/circuit.r1cs
cp tests/data/sha256_32/circuit.wasm $d/
tar xJf tests/data/sha256_32/sha256_32_cpp.tar.xz -C $d
tar xJf tests/data/merkle_d20/merkle_d20_cpp.tar.xz -C bench/circuits/native
tar xJf tests/data/poseidon_k4/poseidon_k4_cpp.tar.xz -C bench/circuits/native
for name in bits_k16 mul_chain_1k; do
    cp "tests/data/circuits/$name.circom" "$WORK/"
    (cd "$WORK" && node_modules/.bin/circom2 "$name.circom" --c --O2 -l . -o . >/dev/null)
    rm -rf "bench/circuits/native/${name}_cpp" && cp -r "$WORK/${name}_cpp" bench/circuits/native/
done
chains=()
for n in ${CHAINS:-65533}; do
    c=bench/circuits/mul_chain_$(( (n + 3) / 1024 ))k
    [ -d "$c/circuit_cpp" ] || bash pipelines/make_bench_circuit.sh "$n" "$c" "$WORK"
    chains+=("$c")
done
python3 - <<'PY'
import json, pathlib, secrets
d = pathlib.Path("bench/circuits/sha256_32/inputs")
for i in range(16):
    (d / f"random_{i:02d}.json").write_text(json.dumps({"in": [secrets.randbits(1) for _ in range(256)]}))
PY
cache=$WORK/native-cache  # kept with $WORK: a second run builds only what changed
mkdir -p "$cache"
DISTPROVE_CACHE_DIR=$cache python3 -m distprove.witness.native $d/sha256_32_cpp bench/circuits/native/*_cpp \
    "${chains[@]/%//circuit_cpp}"
tar -C "$cache" -cJf .kcarry/native.txz witness
# the large chains' r1cs (170 MB at 2^20) stay here: only their witnesses are timed there
tar -C bench/circuits --exclude=mul_chain_256k/circuit.r1cs --exclude=mul_chain_1024k/circuit.r1cs --exclude='*/dev' \
    -cJf .kcarry/circuits.txz sha256_32 native "${chains[@]#bench/circuits/}"
du -sh .kcarry/native.txz .kcarry/circuits.txz
