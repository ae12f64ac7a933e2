#!/usr/bin/env bash
# One multi-GPU host: a scheduler on 127.0.0.1, one dask-cuda worker per GPU, then one batch.
#
#   cluster/local-gpu.sh KEY WITNESS_DIR OUT_DIR [more `distprove batch` options]
#
# Environment (all optional):
#   DISTPROVE_PORT         scheduler port                      (default 8786)
#   DISTPROVE_DASHBOARD    scheduler dashboard address         (default 127.0.0.1:8787)
#   DISTPROVE_WORKERS      workers to wait for                 (default: GPUs that nvidia-smi lists)
#   DISTPROVE_WORKER_CMD   worker command, before the address  (default "dask cuda worker";
#                          on a CPU-only host: "dask worker --nworkers 2 --nthreads 1")
#   DISTPROVE_LOG_DIR      where scheduler.log and workers.log go (default: a new temp folder)
#   DISTPROVE_PYTHON       Python with distributed, to wait for the workers (default python3)
#   DISTPROVE_KEEP=1       leave the cluster running after the batch (prints how to stop it)
# Any DASK_DISTPROVE__* variable (e.g. DASK_DISTPROVE__BACKEND=gpu) reaches the workers too.
set -euo pipefail

if [ $# -lt 3 ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
KEY=$1 WITNESS_DIR=$2 OUT_DIR=$3
shift 3

PORT=${DISTPROVE_PORT:-8786}
DASHBOARD=${DISTPROVE_DASHBOARD:-127.0.0.1:8787}
WORKER_CMD=${DISTPROVE_WORKER_CMD:-dask cuda worker}
LOG_DIR=${DISTPROVE_LOG_DIR:-$(mktemp -d -t distprove-cluster.XXXXXX)}
ADDRESS=tcp://127.0.0.1:$PORT
if [ -z "${DISTPROVE_WORKERS:-}" ]; then
    DISTPROVE_WORKERS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    [ "$DISTPROVE_WORKERS" -gt 0 ] || { echo "no GPU found by nvidia-smi; set DISTPROVE_WORKERS and DISTPROVE_WORKER_CMD" >&2; exit 2; }
fi
mkdir -p "$LOG_DIR"

PIDS=()
stop() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
[ "${DISTPROVE_KEEP:-0}" = 1 ] || trap stop EXIT

dask scheduler --host 127.0.0.1 --port "$PORT" --dashboard-address "$DASHBOARD" >"$LOG_DIR/scheduler.log" 2>&1 &
PIDS+=($!)
# dask-cuda starts one worker process per visible GPU (CUDA_VISIBLE_DEVICES rotated per worker).
# shellcheck disable=SC2086  # WORKER_CMD is a command line on purpose
$WORKER_CMD "$ADDRESS" --host 127.0.0.1 >"$LOG_DIR/workers.log" 2>&1 &
PIDS+=($!)

"${DISTPROVE_PYTHON:-python3}" - "$ADDRESS" "$DISTPROVE_WORKERS" <<'PY'
import sys
from distributed import Client
with Client(sys.argv[1], timeout="60s") as c:
    c.wait_for_workers(int(sys.argv[2]), timeout="120s")
PY
echo "cluster up: $ADDRESS, dashboard http://$DASHBOARD/status, logs in $LOG_DIR" >&2
distprove info --scheduler "$ADDRESS" >&2

status=0
distprove batch "$KEY" "$WITNESS_DIR" --out "$OUT_DIR" --scheduler "$ADDRESS" "$@" || status=$?
if [ "${DISTPROVE_KEEP:-0}" = 1 ]; then
    echo "cluster left running; stop it with: kill ${PIDS[*]}" >&2
fi
exit "$status"
