#!/usr/bin/env bash
# device_run.sh - the one script for every run on the GPU device machine (device tool's `run`).
#
# Run from the repository root on the device:
#   set -o pipefail; DISTPROVE_GIT_COMMIT=<sha> timeout 380 bash pipelines/device_run.sh [pytest args] 2>&1 | tee $OUT/log.txt
# with PYTHONUNBUFFERED=1 (set here too). Pytest args replace the default "-x tests/gpu" (e.g. name
# files in the order wanted, without -x to see every failure).
# Environment:
#   SKIP_TESTS=1 / SKIP_BENCH=1      leave out a step
#   BENCH_ARGS="--sizes 20,24 --only ntt"   passed to pipelines/bench_kernels.py
#   TEST_TIMEOUT (default 250 s), BENCH_TIMEOUT (default 120 s): per-step limits, together under
#   a `timeout 380` around the script (the rule for every run). Seen on an H200 (2026-11-30):
#   tests/gpu of the NTT/gather/backend files ~185-230 s (CPU reference and cold NVRTC of the MSM
#   module dominate), bench_kernels --sizes 20,24,26 ~25 s.
#   DISTPROVE_GIT_COMMIT             recorded in the bench JSON (the device tree may lack .git)
#
# Carried wheels (dask, zarr, ...): when .whl/ exists (call `run` with carry=[".whl"]) they are
# installed first with
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
#
# Everything goes to $OUT: nvidia-smi.txt, tests.log, bench.log, bench.json (at most 8 files come
# back from $OUT). Exit status: nonzero if any step failed or timed out.

set -o pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/distprove-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export DISTPROVE_CACHE_DIR=${DISTPROVE_CACHE_DIR:-/tmp/distprove-cache}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site:$PWD || { echo "wheel install failed"; exit 2; }
fi

{ date -u; nvidia-smi; nvidia-smi -q -d CLOCK,MEMORY | head -60; } > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import cupy, sys; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'devices', cupy.cuda.runtime.getDeviceCount())"

status=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
    if [ $# -eq 0 ]; then set -- -x tests/gpu; fi
    timeout "${TEST_TIMEOUT:-250}" python3 -m pytest -m gpu -q -p no:cacheprovider --durations=10 "$@" 2>&1 | tee "$OUT/tests.log"
    rc=$?; echo "tests: exit $rc"; [ $rc -eq 0 ] || status=1
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    # shellcheck disable=SC2086
    timeout "${BENCH_TIMEOUT:-120}" python3 pipelines/bench_kernels.py --out "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
    rc=$?; echo "bench: exit $rc"; [ $rc -eq 0 ] || status=1
fi
exit $status
