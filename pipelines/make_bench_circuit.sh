#!/usr/bin/env bash
# A circom-compiled multiplication chain for the input-batch and witness benchmarks.
#
#   pipelines/make_bench_circuit.sh N [OUT_DIR] [WORKDIR]
#
# Compiles tests/data/circuits/mul_chain_1k.circom's MulChain template with N multiplications
# (N constraints, N + 2 wires; with the rows snarkjs adds for the public values, N = 65533
# fills a 2^16 domain, 262141 2^18, 1048573 2^20) with circom2 from npm (--O2, as the fixtures), and writes into OUT_DIR (default
# bench/circuits/mul_chain_<(N + 3) / 1024>k: mul_chain_64k, _256k, _1024k):
#   circuit.wasm, circuit.r1cs      the witness calculator and the constraints
#   circuit_cpp/                    circom's C++ witness generator (circom --c), for native witnesses
#   inputs/input_{0,1,2}.json       x0 = 3, a 64-bit value, a field element (fixed values)
# bench_input_batch.py makes the insecure dev key from circuit.r1cs on first use. circom2 takes
# 8 s at 2^16 and 98 s at 2^18 on the 2-core VM; the outputs are the same bytes each time.
# circom2 and its node_modules go to WORKDIR (default a temporary folder, removed after).
set -euo pipefail

N="${1:?usage: make_bench_circuit.sh N [OUT_DIR] [WORKDIR]}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${2:-$REPO/bench/circuits/mul_chain_$(( (N + 3) / 1024 ))k}"
WORK="${3:-}"
if [ -z "$WORK" ]; then WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT; fi
mkdir -p "$WORK" "$OUT/inputs"
OUT="$(cd "$OUT" && pwd)"

if [ ! -x "$WORK/node_modules/.bin/circom2" ]; then
  (cd "$WORK" && npm init -y >/dev/null && npm install --no-audit --no-fund circom2 >/dev/null)
fi
sed '/^component main/d' "$REPO/tests/data/circuits/mul_chain_1k.circom" > "$WORK/circuit.circom"
echo "component main {public [x0]} = MulChain($N);" >> "$WORK/circuit.circom"
(cd "$WORK" && /usr/bin/env time -f "circom2: %e s, %M KB" node_modules/.bin/circom2 circuit.circom --r1cs --wasm --c --O2 -o "$WORK" >/dev/null)
cp "$WORK/circuit.r1cs" "$OUT/circuit.r1cs"
cp "$WORK/circuit_js/circuit.wasm" "$OUT/circuit.wasm"
rm -rf "$OUT/circuit_cpp" && cp -r "$WORK/circuit_cpp" "$OUT/circuit_cpp"

printf '{\n "x0": "3"\n}\n' > "$OUT/inputs/input_0.json"
printf '{\n "x0": "6219819901950120356"\n}\n' > "$OUT/inputs/input_1.json"
printf '{\n "x0": "8486930909368889038623208133781405668956053423072026049647821922104020056009"\n}\n' > "$OUT/inputs/input_2.json"
echo "wrote $OUT"
