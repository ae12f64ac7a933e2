#!/usr/bin/env bash
# Rebuild the fixtures in this folder with circom2 + snarkjs 0.7.6 from npm.
#
#   ./regenerate.sh [WORKDIR]
#
# Per circuit (circuits/<name>.circom, main component included): compile to r1cs + wasm
# (--O2, kept as <name>/circuit.wasm) and, for the circuits with a native witness generator
# (NATIVE below), circom's C++ generator (--c: the <name>_cpp/ folder, kept packed as
# <name>/<name>_cpp.tar.xz, about 70 times smaller than the folder),
# run a small powers-of-tau ceremony (new, one contribution, prepare phase2), Groth16
# setup, one zkey contribution, export the verification key, compute the witnesses from
# <name>/inputs/*.json with the wasm, then prove and verify each with snarkjs.
# mini additionally keeps its r1cs, both ptau files and the single witness/proof.
# The bad/ files are hand-made corruptions of mini's files and are not rebuilt here.
# Randomness (toxic waste, entropy) differs per run, so keys and proofs change;
# tests compare against the files, not against constants derived from this run,
# except mini's header values (SNARKJS_FORMATS.md §10), which do not depend on it.
# Expect about 4 minutes per power-12 `prepare phase2` on two cores.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="${1:-$(mktemp -d)}"
mkdir -p "$WORK"
cd "$WORK"
if [ ! -x node_modules/.bin/snarkjs ]; then
  npm init -y >/dev/null
  npm install --no-audit --no-fund snarkjs@0.7.6 circom2 circomlib
fi
SNARKJS="$WORK/node_modules/.bin/snarkjs"
CIRCOM="$WORK/node_modules/.bin/circom2"

# ceremony POWER OUT: a prepared ptau of the given power
ceremony() {
  local p=$1 out=$2
  [ -f "$out" ] && return 0
  "$SNARKJS" powersoftau new bn128 "$p" "pot${p}_0000.ptau"
  "$SNARKJS" powersoftau contribute "pot${p}_0000.ptau" "pot${p}_0001.ptau" --name="regenerate" -e="entropy $RANDOM$RANDOM"
  "$SNARKJS" powersoftau prepare phase2 "pot${p}_0001.ptau" "$out"
}

# Circuits whose fixtures keep circom's native C++ witness generator.
NATIVE=" poseidon_k4 merkle_d20 sha256_32 checks spin "

# pack_cpp NAME DST: $WORK/NAME_cpp/ into DST/NAME_cpp.tar.xz, the same bytes for the same files
pack_cpp() {
  local name=$1 dst=$2
  tar -C "$WORK" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - "${name}_cpp" \
    | xz -6 >"$dst/${name}_cpp.tar.xz"
}

# compile NAME DST: r1cs + wasm (+ the C++ generator for NATIVE circuits) into $WORK, the wasm to DST
compile() {
  local name=$1 dst=$2 c=()
  case "$NATIVE" in *" $name "*) c=(--c) ;; esac
  "$CIRCOM" "$HERE/circuits/$name.circom" --r1cs --wasm "${c[@]}" --O2 -l "$WORK/node_modules" -o "$WORK"
  cp "$WORK/${name}_js/$name.wasm" "$dst/circuit.wasm"
  [ ${#c[@]} -eq 0 ] || pack_cpp "$name" "$dst"
}

# build NAME POWER: compile, set up, witness, prove, verify into $HERE/NAME
build() {
  local name=$1 p=$2 dst="$HERE/$1" in k
  compile "$name" "$dst"
  ceremony "$p" "$WORK/pot${p}_final.ptau"
  "$SNARKJS" groth16 setup "$WORK/$name.r1cs" "$WORK/pot${p}_final.ptau" "$WORK/${name}_0000.zkey"
  "$SNARKJS" zkey contribute "$WORK/${name}_0000.zkey" "$dst/circuit_final.zkey" --name="phase2" -e="entropy $RANDOM$RANDOM"
  "$SNARKJS" zkey export verificationkey "$dst/circuit_final.zkey" "$dst/verification_key.json"
  [ "$name" = mul_chain_1k ] && cp "$WORK/$name.r1cs" "$dst/circuit.r1cs"
  mkdir -p "$dst/witnesses" "$dst/proofs" "$dst/public"
  for in in "$dst"/inputs/input_*.json; do
    k=$(basename "$in" .json); k=${k#input_}
    "$SNARKJS" wtns calculate "$WORK/${name}_js/$name.wasm" "$in" "$dst/witnesses/witness_$k.wtns"
    "$SNARKJS" groth16 prove "$dst/circuit_final.zkey" "$dst/witnesses/witness_$k.wtns" \
      "$dst/proofs/proof_$k.json" "$dst/public/public_$k.json"
    "$SNARKJS" groth16 verify "$dst/verification_key.json" "$dst/public/public_$k.json" "$dst/proofs/proof_$k.json"
  done
}

build_mini() {
  local dst="$HERE/mini"
  "$CIRCOM" "$HERE/circuits/mini.circom" --r1cs --wasm -o "$WORK"
  cp "$WORK/mini.r1cs" "$dst/mini.r1cs"
  cp "$WORK/mini_js/mini.wasm" "$dst/mini.wasm"
  "$SNARKJS" powersoftau new bn128 4 "$WORK/pot4_0000.ptau"
  "$SNARKJS" powersoftau contribute "$WORK/pot4_0000.ptau" "$WORK/pot4_0001.ptau" --name="First" -e="entropy $RANDOM"
  "$SNARKJS" powersoftau contribute "$WORK/pot4_0001.ptau" "$dst/pot4_0002.ptau" --name="Second" -e="entropy $RANDOM"
  "$SNARKJS" powersoftau prepare phase2 "$dst/pot4_0002.ptau" "$dst/pot4_final.ptau"
  "$SNARKJS" groth16 setup "$dst/mini.r1cs" "$dst/pot4_final.ptau" "$WORK/mini_0000.zkey"
  "$SNARKJS" zkey contribute "$WORK/mini_0000.zkey" "$dst/mini_0001.zkey" --name="c1" -e="entropy $RANDOM"
  "$SNARKJS" zkey export verificationkey "$dst/mini_0001.zkey" "$dst/verification_key.json"
  "$SNARKJS" wtns calculate "$WORK/mini_js/mini.wasm" "$dst/input.json" "$dst/witness.wtns"
  "$SNARKJS" groth16 prove "$dst/mini_0001.zkey" "$dst/witness.wtns" "$dst/proof.json" "$dst/public.json"
  "$SNARKJS" groth16 verify "$dst/verification_key.json" "$dst/public.json" "$dst/proof.json"
  echo "note: mini/proof_py_rs0.json comes from the project's prover (r = s = 0) and is not rebuilt here" >&2
}

# build_witnesses NAME: compile, and snarkjs's witness of each input (no key: a witness-generator fixture)
build_witnesses() {
  local name=$1 dst="$HERE/$1" in k
  compile "$name" "$dst"
  mkdir -p "$dst/witnesses"
  for in in "$dst"/inputs/input_*.json; do
    k=$(basename "$in" .json); k=${k#input_}
    "$SNARKJS" wtns calculate "$WORK/${name}_js/$name.wasm" "$in" "$dst/witnesses/witness_$k.wtns"
  done
}

build_mini
compile checks "$HERE/checks"
mv "$HERE/checks/circuit.wasm" "$HERE/checks/checks.wasm"
compile spin "$HERE/checks"
rm "$HERE/checks/circuit.wasm"  # spin is kept as its C++ generator only
build_witnesses sha256_32
build mul_chain_1k 12
build poseidon_k4 12
build bits_k16 12
build merkle_d20 14
echo "done; scratch files in $WORK"
