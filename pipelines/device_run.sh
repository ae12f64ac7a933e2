#!/usr/bin/env bash
# device_run.sh - the one script for every run on the GPU machine (the device tool's `run`):
# installs the carried wheels, runs the GPU tests, the kernel benchmarks, builds dev keys, runs the
# end-to-end and batch benchmarks, and leaves everything under $OUT.
#
# Call it from the repository root on the device, with carry=[".whl", ".kcache"] (pipelines/fetch_wheels.sh
# fills .whl here; .kcache is the cubin cache a previous run returned as $OUT/kcache.tgz, unpacked
# with `mkdir -p .kcache && tar xzf <files_at>/kcache.tgz -C .kcache`; absent, everything compiles):
#   set -o pipefail; DISTPROVE_GIT_COMMIT=<sha> timeout 520 bash pipelines/device_run.sh [pytest args] 2>&1 | tee $OUT/log.txt
# Pytest args replace the default "tests/gpu".
#
# Steps and their time limits (seconds; each step is cut at its limit and the next one runs), in the
# order they run but for inputs and serve, which run right after batch:
#   compile COMPILE_TIMEOUT=300 `distprove compile` of $COMPILE_MODULES (default: every module) in parallel processes, plus the
#                              MSM builds with each option of $COMPILE_VARIANTS (default none; e.g. -DDP_PTX_MUL)
#                              that the benchmarks try (cold: the slowest module, ~2 min); the cache
#                              goes back as $OUT/kcache.tgz
#   tests   TEST_TIMEOUT=300   python3 -m pytest -m gpu tests/gpu
#   kernels BENCH_TIMEOUT=90   pipelines/bench_kernels.py $BENCH_ARGS  -> bench.json
#   keys    KEYS_TIMEOUT=120   pipelines/make_bench_keys.py --powers $KEY_POWERS --kinds $KEY_KINDS
#                              [--constraints $KEY_CONSTRAINTS] (exact sizes, e.g. "1600000 3200000")
#   e2e     E2E_TIMEOUT=90     pipelines/bench_e2e.py (fixture proofs for snarkjs + synthetic keys)
#   ptau    PTAU_TIMEOUT=90    pipelines/bench_ptau.py (group iFFT levels 2^16-2^20, G1 and G2), then,
#                              with PTAU_PREPARE=P, whole prepares of a dev ptau of power P in-process
#                              and on local clusters of $PTAU_WORKERS (default 2) GPU workers
#                              (PTAU_PREPARE_TIMEOUT=250)
#   profile PROFILE_TIMEOUT=240 only with PROFILE_CASES set (e.g. g1-24,g2-20,ntt-24): Nsight Compute
#                              (--clock-control none) over pipelines/profile_kernels.py's warm launches,
#                              sections $PROFILE_SECTIONS and every warp-stall reason -> ncu.txt
#   batch   BATCH_TIMEOUT=150  pipelines/bench_batch.py, bare loop then 1 (and 2, if present) GPUs, on $BATCH_KEY
#                              (default chain_k20) with $BATCH_ARGS (e.g. "--proofs 64")
#   first   FIRST_TIMEOUT=300  only with FIRST_KEY set (a key folder of the keys step, e.g. chain_k12 with KEY_POWERS
#                              including 12): pipelines/first_batch.sh, the first batch after an install against the
#                              next (fresh JIT caches but the cubins, `distprove compile`, the same batch of
#                              $FIRST_PROOFS (4096) proofs twice in fresh processes) with $FIRST_ARGS -> first.log;
#                              FIRST_BEFORE=1 runs it without `distprove compile` first -> first-before.log
#   inputs  INPUTS_TIMEOUT=300 only with INPUT_CIRCUITS set (e.g. "tests/data/mul_chain_1k tests/data/poseidon_k4:300", a
#                              :COPIES suffix overriding INPUT_ARGS's --copies for that circuit):
#                              pipelines/bench_input_batch.py per circuit folder with $INPUT_ARGS (default: one worker,
#                              1,000 copies, 3 rounds, the inputs also through scratch files, --timeline) -> inputs-NAME.log
#                              (with --gen native=FOLDER: a native generator's input batch beside the wasm's; its driver
#                              built off the machine by pipelines/pack_native.sh into .kcarry/native.txz)
#   curve   CURVE_TIMEOUT=300  only with CURVE_CIRCUIT set (e.g. bench/circuits/sha256_32): the wasm input batch against
#                              witness files with the worker's witness processes held to $CURVE_PROCESSES (4), once per
#                              count of CPU-only witness workers of as many processes in $CURVE_WITNESS_WORKERS ("0 1 2 3")
#                              with $CURVE_ARGS (default "--copies 24 --reps 1") -> curve-K.log
#   wtnscli WTNSCLI_TIMEOUT=300 only with WTNSCLI_CIRCUITS set (folders with circuit.wasm, inputs/ and a circom --c folder in
#                              them or under bench/circuits/native): pipelines/bench_wtns_cli.py, one `distprove wtns
#                              calculate` per generator over $WTNSCLI_COUNT (256) inputs -> wtns_cli.json
#   serve   SERVE_TIMEOUT=400  only with SERVE_KEYS set (KEYDIR:PROOFS of the keys step, e.g. "chain_k12:4096
#                              chain_k16:1500"): pipelines/bench_serve.py per key and per depth of $SERVE_DEPTHS ("1 4":
#                              requests each of the 64 clients keeps outstanding; the batch and in-process phases run with
#                              the first only) with $SERVE_ARGS -> serve-KEY-dDEPTH.{log,json}, kept proofs in serve-KEY-dDEPTH/
#   wtns    WTNS_TIMEOUT=300   only with WTNS_CIRCUITS set (folders with circuit.wasm and inputs/): pipelines/bench_witnessgen.py,
#                              distprove against snarkjs when node is carried (.nodecarry, pipelines/pack_node.sh), then
#                              1, 8 and 16 witness processes at once -> witnessgen.json, witnessgen-processes.json
#   ab      AB_TIMEOUT=300     only with AB_TREE and AB_CMD: AB_CMD (e.g. "python3 pipelines/bench_batch.py --key
#                              /tmp/distprove-keys/chain_k12/key.zarr --witnesses /tmp/distprove-keys/chain_k12 --backend gpu
#                              --workers 1 --proofs 4096") run from this tree's root and from AB_TREE's (another source
#                              tree carried in the working tree, e.g. `git archive REV | tar -x -C .ab/base`), alternating
#                              for AB_ROUNDS (3) rounds -> ab-this-N.log, ab-other-N.log
# SKIP="tests kernels ..." leaves steps out. Results: $OUT/log.txt (the tee) and $OUT/results.tgz
# (every JSON and log, re-packed after each step so a run cut short still returns what it made).
#
# Wheels: those of .whl/ (or .nodecarry/) are installed first with
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD

set -o pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/distprove-out}
RES=/tmp/distprove-results
KEYS=/tmp/distprove-keys
mkdir -p "$OUT" "$RES" "$KEYS"
export PYTHONUNBUFFERED=1
export DISTPROVE_CACHE_DIR=${DISTPROVE_CACHE_DIR:-$PWD/.kcache}
mkdir -p "$DISTPROVE_CACHE_DIR"
# A packed cache (cubins gzip about 3x: carry=[".whl", ".kcarry"] keeps the tree under the
# device tool's 64 MiB when several MSM builds travel): `python3 pipelines/pack_kcache.py` packs
# the builds of this tree (and of A/B trees and msm options) from the local cache, compiling any missing.
[ -f .kcarry/kcache.tgz ] && tar xzf .kcarry/kcache.tgz -C "$DISTPROVE_CACHE_DIR"
# native witness generators built off the machine, which has no compilers (pipelines/pack_native.sh)
[ -f .kcarry/native.txz ] && python3 -c "import sys, tarfile; tarfile.open('.kcarry/native.txz').extractall(sys.argv[1])" "$DISTPROVE_CACHE_DIR"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# the carried wheels: .whl (pipelines/fetch_wheels.sh), or .nodecarry's wasmtime (pipelines/pack_node.sh)
mapfile -t wheels < <(compgen -G ".whl/*.whl"; compgen -G ".nodecarry/*.whl")
if [ ${#wheels[@]} -gt 0 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${wheels[@]}" \
        && export PYTHONPATH=/tmp/site:$PWD || { echo "wheel install failed"; exit 2; }
fi

# node and snarkjs, which the image lacks (packed by pipelines/pack_node.sh)
if [ -f .nodecarry/node.tar.xz ]; then
    mkdir -p /tmp/node && python3 -c "import tarfile; tarfile.open('.nodecarry/node.tar.xz').extractall('/tmp/node')" \
        && export PATH=/tmp/node/bin:$PATH && { [ -e node_modules ] || ln -s /tmp/node/node_modules node_modules; }
fi
# the benchmarks' circom circuits (pipelines/make_bench_circuit.sh), packed by
# `tar -C bench/circuits -cJf .kcarry/circuits.txz mul_chain_64k mul_chain_256k mul_chain_1024k`
# an A/B base tree, packed by `git archive REV distprove pipelines | xz > .kcarry/ab-base.txz`: AB_TREE=.ab/base
if [ -f .kcarry/ab-base.txz ]; then
    mkdir -p .ab/base && python3 -c "import tarfile; tarfile.open('.kcarry/ab-base.txz').extractall('.ab/base')"
fi
if [ -f .kcarry/circuits.txz ]; then
    mkdir -p bench/circuits && python3 -c "import tarfile; tarfile.open('.kcarry/circuits.txz').extractall('bench/circuits')"
fi

{ date -u; nvidia-smi; nvidia-smi -q -d CLOCK,MEMORY | head -60; } > "$RES/nvidia-smi.txt" 2>&1
# what the carried cubin cache holds, and the names this tree and this NVRTC look for (a module
# that compiles although carried shows here which part of its cache key differs)
{ ls -la "$DISTPROVE_CACHE_DIR"; python3 -c "
from cupy.cuda import nvrtc
from distprove.backends.gpu.compile import MODULES, MODULE_OPTIONS, _cubin
print('nvrtc', nvrtc.getVersion())
for n in MODULES: print(_cubin(MODULES[n], n, MODULE_OPTIONS.get(n, ()), 'sm_90')[2].name)"; } > "$RES/kcache-list.txt" 2>&1
python3 -c "import cupy, sys; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'devices', cupy.cuda.runtime.getDeviceCount())"
NGPU=$(python3 -c "import cupy; print(cupy.cuda.runtime.getDeviceCount())" 2>/dev/null || echo 0)

pack() { tar czf "$OUT/results.tgz" -C "$RES" . 2>/dev/null; }
[ -n "${DISTPROVE_GIT_COMMIT:-}" ] || echo "warning: DISTPROVE_GIT_COMMIT is unset: results record the git metadata of the device's copy, which can be older than the tree sent"
want() { [[ " ${SKIP:-} " != *" $1 "* ]]; }
status=0
step() {  # step NAME LIMIT CMD...: run with a time limit, log to $RES/NAME.log, re-pack results
    local name=$1 limit=$2; shift 2
    echo "=== $name (limit ${limit}s) $(date -u +%T)"
    timeout "$limit" "$@" 2>&1 | tee "$RES/$name.log"
    local rc=$?
    echo "=== $name: exit $rc"
    [ $rc -eq 0 ] || status=1
    pack
}

if want compile; then
    # shellcheck disable=SC2016
    step compile "${COMPILE_TIMEOUT:-300}" bash -c 'python3 -m distprove.cli compile ${COMPILE_MODULES:-} & a=$!
        for o in ${COMPILE_VARIANTS:-}; do python3 -m distprove.cli compile msm --option="$o" & done
        wait $a && wait'
    tar czf "$OUT/kcache.tgz" -C "$DISTPROVE_CACHE_DIR" . 2>/dev/null
fi
if want tests; then
    [ $# -eq 0 ] && set -- tests/gpu
    step tests "${TEST_TIMEOUT:-300}" python3 -m pytest -m gpu -q -p no:cacheprovider --durations=15 "$@"
fi
if want kernels; then
    # shellcheck disable=SC2086
    step kernels "${BENCH_TIMEOUT:-90}" python3 pipelines/bench_kernels.py --out "$RES/bench_kernels.json" ${BENCH_ARGS:-}
fi
if want keys; then
    # shellcheck disable=SC2086
    step keys "${KEYS_TIMEOUT:-120}" python3 pipelines/make_bench_keys.py --out "$KEYS" \
        --powers ${KEY_POWERS:-16 18 20} ${KEY_CONSTRAINTS:+--constraints $KEY_CONSTRAINTS} --kinds ${KEY_KINDS:-chain}
    cp "$KEYS/timings.json" "$RES/keys_timings.json" 2>/dev/null; pack
fi
if want e2e; then
    step e2e "${E2E_TIMEOUT:-90}" python3 pipelines/bench_e2e.py --keys "$KEYS" --proofs-out "$RES/fixture_proofs" \
        --reps "${E2E_REPS:-5}" --out "$RES/bench_e2e.json"
fi
if want ptau; then
    step ptau "${PTAU_TIMEOUT:-90}" python3 pipelines/bench_ptau.py --powers "${PTAU_POWERS:-16,18,20}" --json "$RES/bench_ptau.json"
    if [ -n "${PTAU_PREPARE:-}" ]; then
        step ptau-prepare "${PTAU_PREPARE_TIMEOUT:-250}" python3 pipelines/bench_ptau.py --prepare-power "$PTAU_PREPARE" \
            --workers "${PTAU_WORKERS:-2}" --json "$RES/bench_ptau_prepare.json"
    fi
fi
if [ -n "${PROFILE_CASES:-}" ] && want profile; then
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    sections=""
    for s in ${PROFILE_SECTIONS:-SpeedOfLight Occupancy LaunchStats WarpStateStats ComputeWorkloadAnalysis MemoryWorkloadAnalysis}; do
        sections="$sections --section $s"
    done
    stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
    # shellcheck disable=SC2086
    step profile "${PROFILE_TIMEOUT:-240}" bash -c "\"$NCU\" --clock-control none --profile-from-start off $sections --metrics '$stalls' \
        python3 pipelines/profile_kernels.py --cases $PROFILE_CASES > $RES/ncu.txt 2>&1; tail -5 $RES/ncu.txt"
fi
if want batch && [ "$NGPU" -ge 1 ]; then
    k=$KEYS/${BATCH_KEY:-chain_k20}
    workers=1; [ "$NGPU" -ge 2 ] && workers=1,2
    [ -d "$k/key.zarr" ] && src="--key $k/key.zarr --witnesses $k" || src="--log-n 18"
    # shellcheck disable=SC2086
    step batch "${BATCH_TIMEOUT:-150}" python3 pipelines/bench_batch.py $src --backend gpu --workers $workers \
        ${BATCH_ARGS:-} --json "$RES/bench_batch.json"
fi
if [ -n "${INPUT_CIRCUITS:-}" ] && want inputs && [ "$NGPU" -ge 1 ]; then
    # shellcheck disable=SC2086
    step inputs "${INPUTS_TIMEOUT:-300}" bash -c "for e in $INPUT_CIRCUITS; do c=\${e%%:*}; n=; [ \"\$e\" != \"\$c\" ] && n=\"--copies \${e##*:}\"; \
        python3 pipelines/bench_input_batch.py \$c --backend gpu \
        ${INPUT_ARGS:---workers 1 --copies 1000 --reps 3 --also witness.shared-memory=null --timeline} \$n > $RES/inputs-\$(basename \$c).log 2>&1; \
        tail -1 $RES/inputs-\$(basename \$c).log; done"
fi
if [ -n "${SERVE_KEYS:-}" ] && want serve && [ "$NGPU" -ge 1 ]; then
    # shellcheck disable=SC2016
    step serve "${SERVE_TIMEOUT:-400}" bash -c 'for kp in $SERVE_KEYS; do k=${kp%%:*} n=${kp##*:} skip=""
        for d in ${SERVE_DEPTHS:-1 4}; do
            python3 pipelines/bench_serve.py --key "'"$KEYS"'/$k/key.zarr" --witnesses "'"$KEYS"'/$k" --backend gpu -N "$n" \
                --depth "$d" ${skip:+--skip $skip} --time-limit 240 --json "'"$RES"'/serve-$k-d$d.json" --out "'"$RES"'/serve-$k-d$d" \
                ${SERVE_ARGS:-} > "'"$RES"'/serve-$k-d$d.log" 2>&1
            grep -E "^(batch|service|  latency|idle|in-process)" "'"$RES"'/serve-$k-d$d.log"; skip=batch,inprocess
        done
    done'
fi
if [ -n "${FIRST_KEY:-}" ] && want first && [ "$NGPU" -ge 1 ] && [ -n "${FIRST_BEFORE:-}" ]; then
    # shellcheck disable=SC2086
    step first-before "${FIRST_TIMEOUT:-300}" env COMPILE=0 PROOFS="${FIRST_PROOFS:-4096}" bash pipelines/first_batch.sh \
        "$KEYS/$FIRST_KEY/key.zarr" "$KEYS/$FIRST_KEY" --backend gpu ${FIRST_ARGS:-}
fi
if [ -n "${FIRST_KEY:-}" ] && want first && [ "$NGPU" -ge 1 ]; then
    # shellcheck disable=SC2086
    step first "${FIRST_TIMEOUT:-300}" env PROOFS="${FIRST_PROOFS:-4096}" bash pipelines/first_batch.sh \
        "$KEYS/$FIRST_KEY/key.zarr" "$KEYS/$FIRST_KEY" --backend gpu ${FIRST_ARGS:-}
fi
if [ -n "${CURVE_CIRCUIT:-}" ] && want curve && [ "$NGPU" -ge 1 ]; then
    # shellcheck disable=SC2086
    step curve "${CURVE_TIMEOUT:-300}" bash -c "for k in ${CURVE_WITNESS_WORKERS:-0 1 2 3}; do python3 pipelines/bench_input_batch.py \
        $CURVE_CIRCUIT --backend gpu --workers 1 --witness-workers \$k --set witness.processes=${CURVE_PROCESSES:-4} \
        --set witness.on-provers=true ${CURVE_ARGS:---copies 24 --reps 1} > $RES/curve-\$k.log 2>&1; tail -1 $RES/curve-\$k.log; done"
fi
if [ -n "${WTNSCLI_CIRCUITS:-}" ] && want wtnscli; then
    # shellcheck disable=SC2086
    step wtnscli "${WTNSCLI_TIMEOUT:-300}" python3 pipelines/bench_wtns_cli.py $WTNSCLI_CIRCUITS --native-root bench/circuits/native \
        --count "${WTNSCLI_COUNT:-256}" --budget "${WTNSCLI_BUDGET:-60}" --json "$RES/wtns_cli.json"
fi
if [ -n "${WTNS_CIRCUITS:-}" ] && want wtns; then
    # shellcheck disable=SC2086
    step wtns "${WTNS_TIMEOUT:-300}" bash -c "python3 pipelines/bench_witnessgen.py $WTNS_CIRCUITS --reps 5 --warm-reps 20 \
        --json $RES/witnessgen.json; python3 pipelines/bench_witnessgen.py $WTNS_CIRCUITS --processes 1,8,16 --warm-reps 20 \
        --json $RES/witnessgen-processes.json"
fi
if [ -n "${AB_TREE:-}" ] && [ -n "${AB_CMD:-}" ] && want ab; then
    # shellcheck disable=SC2016
    step ab "${AB_TIMEOUT:-300}" bash -c 'for n in $(seq "${AB_ROUNDS:-3}"); do
        for side in this other; do
            dir=$PWD; [ $side = other ] && dir=$(cd "$AB_TREE" && pwd)
            (cd "$dir" && PYTHONPATH=/tmp/site:$dir eval "$AB_CMD") > "'"$RES"'/ab-$side-$n.log" 2>&1
            echo "$side $n: $(tail -1 "'"$RES"'/ab-$side-$n.log" | cut -c1-300)"
        done
    done'
fi
exit $status
