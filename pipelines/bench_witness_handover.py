"""What taking a pool's witness costs the thread that proves, by the way the witness comes back.

    python pipelines/bench_witness_handover.py [--values 65536] [--witnesses 400] [--processes 2] [--busy 1.0]

A process pool makes ``--witnesses`` witnesses of ``--values`` values (random, below r; each job
sleeps ``--compute`` ms, for the wasm), at most ``--window`` at a time, and hands each back:

* ``file``: written as a scratch .wtns (what an input batch's witness pool does), read back as
  the GPU backend's prefetch reads it (``read_wtns`` without the value scan);
* ``result``: returned in the job's result (pickled through the pool's pipe);
* ``shared``: written into a slot of a file mapped by the pool's processes and the consumer (in
  /dev/shm), copied out of the slot.

A consumer thread, as a worker's proving thread does, waits for each in order and copies it into
a host stack row. Beside it a thread holds the GIL in bursts of ``--busy`` ms every 2 x that (a
worker's finisher: the check's host part, the proofs' JSON). Printed per way: the consumer's
milliseconds a witness spent taking it (not waiting for it), and the batch's witnesses/s.

``--circuit DIR`` measures the product's own handover instead: on a one-worker local cluster with
its witness pool, a task claims ``--witnesses`` copies of DIR's ``inputs/*.json`` for DIR's
``circuit.wasm`` (:func:`distprove.witness.pool.claim`) ``--window`` at a time (a proof
group), waits for them, then takes each in order beside the GIL-holding thread: ``shared`` out of the worker's shared slots
(``witness.shared-memory``), ``file`` as the scratch .wtns the GPU backend's prefetch reads.
Printed per way: the milliseconds a take cost and the pool's witnesses/s.
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np


def _values(n: int, seed: int) -> np.ndarray:
    """Random standard-form field elements (top limb masked below r)."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint32)
    v[:, 7] &= 0x0FFFFFFF
    return v


_mapped: dict[str, np.ndarray] = {}
"""In a pool process: the shared slot files mapped so far."""


def _slots(path: str, n: int) -> np.ndarray:
    """The (slots, n, 8) uint32 view of the shared slot file at ``path``, mapped once a process."""
    if path not in _mapped:
        with open(path, "r+b") as f:
            _mapped[path] = np.frombuffer(mmap.mmap(f.fileno(), 0), np.uint32).reshape(-1, n, 8)
    return _mapped[path]


def _job(n: int, seed: int, compute_ms: float, way: str, where: str, slot: int) -> str | np.ndarray:
    """In a pool process: one witness, handed back ``way``: written to the file ``where``, into
    slot ``slot`` of the shared slot file ``where``, or returned."""
    from distprove.formats.wtns import write_wtns

    time.sleep(compute_ms / 1e3)
    values = _values(n, seed)
    if way == "file":
        write_wtns(where, values, durable=False)
    elif way == "shared":
        _slots(where, n)[slot] = values
    else:
        return values
    return ""


def _busy(stop: threading.Event, hold_ms: float) -> None:
    """Hold the GIL ``hold_ms`` at a time, then sleep as long (a finisher's Python work)."""
    while not stop.is_set():
        end = time.perf_counter() + hold_ms / 1e3
        x = 0
        while time.perf_counter() < end:
            x += 1
        time.sleep(hold_ms / 1e3)


def run(way: str, args: argparse.Namespace, folder: str) -> tuple[float, float]:
    """(ms a witness the consumer spent taking it, witnesses/s) for ``way`` (file, result, shared)."""
    from distprove.formats.wtns import read_wtns

    stack = np.empty((64, args.values, 8), np.uint32)
    slots = 2 * args.window
    shared = os.path.join(folder, "slots")
    if way == "shared":
        with open(shared, "wb") as f:
            f.truncate(slots * args.values * 32)
        with open(shared, "r+b") as f:
            view = np.frombuffer(mmap.mmap(f.fileno(), 0), np.uint32).reshape(slots, args.values, 8)

    def where(k: int) -> str:
        return os.path.join(folder, f"w{k}.wtns") if way == "file" else shared

    stop = threading.Event()
    busy = threading.Thread(target=_busy, args=(stop, args.busy), daemon=True)
    taking = 0.0
    with ProcessPoolExecutor(args.processes, mp_context=get_context("spawn")) as pool:
        list(pool.map(time.sleep, [0.2] * args.processes))  # started
        if args.busy > 0:
            busy.start()
        t0 = time.perf_counter()
        futures: dict[int, Future] = {}
        for k in range(min(args.window, args.witnesses)):
            futures[k] = pool.submit(_job, args.values, k, args.compute, way, where(k), k % slots)
        for k in range(args.witnesses):
            result = futures.pop(k).result()
            t = time.perf_counter()
            if way == "file":
                stack[k % 64] = read_wtns(where(k), check_values=False).values
                os.unlink(where(k))
            elif way == "shared":
                stack[k % 64] = view[k % slots]
            else:
                stack[k % 64] = result
            taking += time.perf_counter() - t
            if k + args.window < args.witnesses:
                j = k + args.window
                futures[j] = pool.submit(_job, args.values, j, args.compute, way, where(j), j % slots)
        wall = time.perf_counter() - t0
    stop.set()
    if busy.is_alive():
        busy.join()
    if way == "shared":
        del view
        os.unlink(shared)
    return taking / args.witnesses * 1e3, args.witnesses / wall


def _product_takes(wasm: str, inputs: list[str], scratch: str, shared: int, busy_ms: float, window: int) -> tuple[float, float]:
    """On a worker, beside a GIL-holding thread: claim the inputs' witnesses ``window`` at a time
    (a proof group), wait for the window, then take each (the shared slot's values, or the
    scratch file read as the GPU prefetch reads it), so slots and files are used again as in a
    batch; (ms a take, witnesses/s through the whole loop)."""
    import uuid

    from concurrent.futures import wait

    from distprove.formats.wtns import read_wtns
    from distprove.witness.pool import WitnessSource, await_witness, claim, forget_batch
    from distprove.witness.wasm import calculator

    n_vars = calculator(wasm).info.witness_size
    batch = uuid.uuid4().hex
    sources = [(WitnessSource(wasm, inp, False, batch, shared), os.path.join(scratch, f"w{k}.wtns")) for k, inp in enumerate(inputs)]
    stop = threading.Event()
    busy = threading.Thread(target=_busy, args=(stop, busy_ms), daemon=True)
    taking = 0.0
    try:
        if busy_ms > 0:
            busy.start()
        t0 = time.perf_counter()
        for k in range(0, len(sources), window):
            group = sources[k:k + window]
            wait([entry.job for entry in claim(group, n_vars) if entry is not None])  # a failed input raises when taken
            t = time.perf_counter()
            read = []
            for src, wtns in group:
                values = await_witness(src, wtns, n_vars)
                if values is None:
                    values = read_wtns(wtns, check_values=False).values
                    read.append(wtns)
            taking += time.perf_counter() - t
            for wtns in read:  # the batch's client removes them, not the proving thread
                os.unlink(wtns)
        rate = len(inputs) / (time.perf_counter() - t0)
    finally:
        stop.set()
        forget_batch(batch)
    return taking / len(inputs) * 1e3, rate


def product(args: argparse.Namespace, folder: str) -> None:
    """``--circuit``: the product's handover, shared slots against scratch files."""
    import dask
    from distributed import Client, LocalCluster

    from distprove.cluster.batching import ensure_worker_state
    from distprove.witness.pool import ensure_pool

    circuit = Path(args.circuit)
    inputs = sorted(str(p) for p in (circuit / "inputs").glob("*.json"))
    inputs = [inputs[k % len(inputs)] for k in range(args.witnesses)]
    with dask.config.set({"distributed.worker.daemon": False, "distprove.witness.processes": args.processes}):
        with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
            ensure_pool(client)
            ensure_worker_state(client, "cpu", 2, None)  # as a batch does (its setup tunes the worker's allocator)
            for rep in range(args.reps + 1):
                for way, shared in (("file", 0), ("shared", 1 << 30)):
                    ms, rate = client.submit(_product_takes, str(circuit / "circuit.wasm"), inputs, folder, shared, args.busy,
                                             args.window, pure=False).result()
                    if rep:  # the first round starts the pool's processes and compiles the wasm
                        print(f"rep {rep} {way:6s}: {ms:.3f} ms a witness taking it, {rate:.0f} witnesses/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--values", type=int, default=1 << 16)
    ap.add_argument("--witnesses", type=int, default=400)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--compute", type=float, default=0.0, help="ms each job sleeps (the wasm's time)")
    ap.add_argument("--busy", type=float, default=1.0, help="ms bursts of a GIL-holding thread (0: none)")
    ap.add_argument("--window", type=int, default=64, help="witnesses asked for and not yet taken, at most")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--circuit", help="a folder with circuit.wasm and inputs/*.json: the product's handover")
    args = ap.parse_args()
    if args.circuit:
        with tempfile.TemporaryDirectory(dir=args.dir) as folder:
            product(args, folder)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for rep in range(args.reps):
            for way in ("file", "result", "shared"):
                ms, rate = run(way, args, folder)
                print(f"rep {rep} {way:6s}: {ms:.3f} ms a witness taking it, {rate:.0f} witnesses/s", flush=True)


if __name__ == "__main__":
    main()
