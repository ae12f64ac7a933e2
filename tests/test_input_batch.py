"""distprove.batch from a folder of inputs (distprove.cluster.inputbatch) on a CPU LocalCluster of 2
single-threaded, non-daemonic worker processes (so each registers a process pool for witnesses).

A folder of mul_chain_1k inputs proves with at most ``witness.in-flight`` witnesses on disk at a
time, the scheduler counts every input's proof as it is written and the witness computation is
metered as the witness-gen stage, every proof verifies (distprove, and snarkjs when present),
the scratch witnesses are gone and a rerun (plain or incremental) skips them; a mixed bits_k16 folder fails only its bad inputs,
each with one line naming the input, and keeps byte-identical witnesses of the good ones; a wasm
of another circuit, a missing one or a file that is no wasm is one line before any cluster starts.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import dask
import numpy as np
import pytest
from click.testing import CliRunner

import distprove
from conftest import find_snarkjs, snarkjs_verify
from distprove.cli import main
from distprove.cluster import incremental
from distprove.cluster.state import WITNESS_GEN, WITNESS_WAIT
from distprove.errors import FormatError
from distprove.formats.wtns import read_wtns
from distprove.witness.discovery import SCRATCH_DIR, discover_inputs, holds_inputs
from distprove.witness.pool import EXECUTOR

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def client() -> Iterator:
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.worker.daemon": False}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            with Client(cluster) as c:
                c.wait_for_workers(2)
                yield c


def _folder(tmp_path: Path, fixture: str, with_inputs: bool = True) -> Path:
    """tmp/<fixture>/ holding the fixture's key, wasm and (``with_inputs``) inputs."""
    root = tmp_path / fixture
    root.mkdir()
    shutil.copy(DATA / fixture / "circuit_final.zkey", root)
    shutil.copy(DATA / fixture / "circuit.wasm", root)
    if with_inputs:
        for p in sorted((DATA / fixture / "inputs").glob("*.json")):
            shutil.copy(p, root)
    return root


class ScratchWatcher:
    """Records, from a thread, the most witness files present at once in the scratch folder."""

    def __init__(self, scratch: Path) -> None:
        self.scratch, self.most, self._stop = scratch, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.scratch.exists():
                self.most = max(self.most, len(list(self.scratch.glob("*.wtns"))))
            time.sleep(0.005)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


def _held_witnesses(dask_worker: Any) -> int:
    """Witness values held in a worker's claims, computed and not yet taken by a proof task."""
    from distprove.witness import pool

    with pool._claims_lock:
        entries = [e for batch in pool._claims.values() for e in batch.values() if e is not None]
    return sum(1 for e in entries if e.ring is not None and e.job.done() and e.job.exception() is None and e.job.result()[e.index] == "")


class HeldWatcher(ScratchWatcher):
    """Records the most witnesses held in the workers' shared slots at once (polled from a thread)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        super().__init__(Path())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, sum(self.client.run(_held_witnesses).values()))
            time.sleep(0.005)


def test_inputs_prove_stream_verify_and_rerun_skips(client, tmp_path: Path) -> None:
    """An input batch streams: its witnesses come to the proof tasks in the workers' shared slots
    (no scratch file written), at most the in-flight bound at once."""
    root = _folder(tmp_path, "mul_chain_1k")
    out = root / "proofs"
    assert holds_inputs(root)
    assert all(client.run(lambda dask_worker: EXECUTOR not in dask_worker.executors).values())
    files, watcher = ScratchWatcher(out / SCRATCH_DIR), HeldWatcher(client)
    bar: list[tuple[int, int]] = []  # the distprove page's (total, done) at each result

    def counts(dask_scheduler: Any) -> tuple[int, int]:
        tally = dask_scheduler.plugins["distprove-dashboard"].latest()
        return tally.total, tally.proved

    def on_result(res: Any) -> None:
        bar.append(client.run_on_scheduler(counts))

    with dask.config.set({"distprove.witness.in-flight": 2}):
        report = distprove.batch(root, client=client, echo=None, on_result=on_result)
    most, written = watcher.stop(), files.stop()
    assert report.ok and len(report.proved) == 3, report.summary()
    assert 1 <= most <= 2 and written == 0
    # every input's proof counted from the start, each by the time its result is in
    assert [a for a, _ in bar] == [3] * 3 and all(d >= i + 1 for i, (_, d) in enumerate(bar)), bar
    assert WITNESS_GEN in report.stage_seconds
    # each proof's wait for its witness comes back with its stage seconds, and the report sums them
    assert all(WITNESS_WAIT in r.seconds for r in report.proved), [r.seconds for r in report.proved]
    assert report.witness_wait_seconds == sum(r.seconds[WITNESS_WAIT] for r in report.proved) >= 0

    def activities(dask_scheduler: Any) -> set[str]:
        return {
            activity for span in dask_scheduler.extensions["spans"].spans.values() if span.name == ("distprove-batch",)
            for context, prefix, activity, unit in span.cumulative_worker_metrics
            if context == "execute" and unit == "seconds" and prefix == WITNESS_GEN
        }

    assert WITNESS_GEN in client.run_on_scheduler(activities)
    kinds = set(client.run(lambda dask_worker: type(dask_worker.executors[EXECUTOR]).__name__).values())
    assert kinds == {"ProcessPoolExecutor"}
    assert not (out / SCRATCH_DIR).exists() and not list(out.glob("*.wtns"))
    vk = DATA / "mul_chain_1k" / "verification_key.json"
    snarkjs = find_snarkjs()
    for k in range(3):
        proof, public = out / f"input_{k}.proof.json", out / f"input_{k}.public.json"
        assert distprove.verify(vk, public, proof)
        # the public signals are the fixture witness's (snarkjs proved the same input)
        assert json.loads(public.read_text()) == json.loads((DATA / "mul_chain_1k" / "public" / f"public_{k}.json").read_text())
        if snarkjs:
            assert snarkjs_verify(vk, public, proof, snarkjs)

    again = distprove.batch(root, client=client, echo=None)
    assert [r.status for r in again.results] == ["skipped"] * 3
    assert WITNESS_GEN not in again.stage_seconds and "prove-whole" not in again.stage_seconds
    adopted = incremental.batch(root, client=client, echo=None)  # rule 2 on the workers, then recorded
    assert [r.status for r in adopted.results] == ["skipped"] * 3
    recorded = incremental.batch(root, client=client, echo=None)  # rule 1: the state file, no cluster work
    assert {r.reason for r in recorded.results} == {"recorded as proved in the state file"}


@pytest.mark.parametrize("mode", ["auto", "split"])
def test_mixed_folder_fails_only_bad_inputs_and_keeps_witnesses(client, tmp_path: Path, mode: str) -> None:
    """Data mode (auto here): each proof task computes its group's witnesses as it proves, and
    reports the inputs that fail; split mode: proofs go out once their witnesses exist, and the
    feed reports the inputs that fail. The same outcomes either way."""
    root = _folder(tmp_path, "bits_k16", with_inputs=False)
    good = sorted((DATA / "bits_k16" / "inputs").glob("*.json"))[:2]
    for p in good:
        shutil.copy(p, root)
    values = json.loads(good[0].read_text())
    (root / "missing.json").write_text(json.dumps({}))
    too_big = dict(values, v=[str(2**64 + 5)] + values["v"][1:])
    (root / "assert.json").write_text(json.dumps(too_big))
    (root / "garbage.json").write_text("this is not JSON")
    (root / "notes.txt").write_text("not an input: ignored")
    (root / "verification_key.json").write_text("{}")  # a key's companion: not an input
    out = tmp_path / "out"

    report = distprove.batch(root, out_dir=out, client=client, echo=None, keep_witnesses=True, mode=mode)
    assert report.mode == ("split" if mode == "split" else "data")
    status = {r.name: r for r in report.results}
    assert sorted(status) == ["assert", "garbage", "input_0", "input_1", "missing"]
    assert [status[n].status for n in ("input_0", "input_1")] == ["proved", "proved"]
    reasons = {n: status[n].reason for n in ("assert", "garbage", "missing")}
    assert all(status[n].status == "failed" and "\n" not in r for n, r in reasons.items())
    assert reasons["missing"] == f"{root / 'missing.json'}: missing input signals: 0 of the circuit's 16 input values are given"
    assert reasons["assert"].startswith(f"{root / 'assert.json'}: the circuit rejects the input: Assert Failed. Error in template Num2Bits")
    assert reasons["garbage"].startswith(f"{root / 'garbage.json'}: not valid JSON")
    assert f"FAILED missing: {reasons['missing']}" in report.summary()
    vk = DATA / "bits_k16" / "verification_key.json"
    for p in good:
        name = p.stem
        assert distprove.verify(vk, out / f"{name}.public.json", out / f"{name}.proof.json")
        calculated = tmp_path / f"{name}.calculated.wtns"
        res = CliRunner().invoke(main, ["wtns", "calculate", str(root / "circuit.wasm"), str(p), str(calculated)])
        assert res.exit_code == 0, res.output
        assert (out / f"{name}.wtns").read_bytes() == calculated.read_bytes()
    assert sorted(q.name for q in out.glob("*.wtns")) == ["input_0.wtns", "input_1.wtns"]
    assert not list(out.glob("*.tmp*"))

    # a rerun skips the proved inputs (their kept witnesses' public signals match) and fails the bad ones again
    again = distprove.batch(root, out_dir=out, client=client, echo=None, keep_witnesses=True, mode=mode)
    assert {r.name: r.status for r in again.results} == {
        "assert": "failed", "garbage": "failed", "input_0": "skipped", "input_1": "skipped", "missing": "failed"
    }


def test_inputs_stream_through_scratch_files(client, tmp_path: Path) -> None:
    """Without shared slots (``witness.shared-memory`` null) witnesses reach the proof tasks
    through scratch files, at most the in-flight bound at once, removed by the batch's end."""
    root = _folder(tmp_path, "mul_chain_1k")
    out = root / "proofs"
    watcher = ScratchWatcher(out / SCRATCH_DIR)
    with dask.config.set({"distprove.witness.in-flight": 2, "distprove.witness.shared-memory": None}):
        report = distprove.batch(root, client=client, echo=None)
    most = watcher.stop()
    assert report.ok and len(report.proved) == 3, report.summary()
    assert 1 <= most <= 2
    assert not (out / SCRATCH_DIR).exists() and not list(out.glob("*.wtns"))
    vk = DATA / "mul_chain_1k" / "verification_key.json"
    assert all(distprove.verify(vk, out / f"input_{k}.public.json", out / f"input_{k}.proof.json") for k in range(3))


def test_a_wasm_that_cannot_serve_the_key_is_one_line_before_any_cluster(tmp_path: Path) -> None:
    """--wasm of another circuit, a file that is no wasm, a missing one: one line naming the wasm
    and exit status 1, from the client (the scheduler address reaches nothing: no cluster is
    contacted), no report and no output."""
    root = _folder(tmp_path, "mul_chain_1k")
    (tmp_path / "notwasm.wasm").write_text("hello\n")
    for wasm, words in ((DATA / "poseidon_k4" / "circuit.wasm", "a wasm of another circuit"),
                        (tmp_path / "notwasm.wasm", "not a WebAssembly module"),
                        (tmp_path / "missing.wasm", "no such witness generator")):
        res = CliRunner().invoke(
            main, ["batch", str(root / "circuit_final.zkey"), str(root), "--wasm", str(wasm), "--out", str(tmp_path / "out"),
                   "--scheduler", "tcp://127.0.0.1:1", "--report", str(tmp_path / "report.json")],
        )
        assert res.exit_code == 1, res.output
        lines = res.output.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {wasm}: ") and words in lines[0], res.output
        assert not (tmp_path / "report.json").exists() and not (tmp_path / "out").exists()


def test_a_bad_wasm_beside_one_key_fails_only_that_keys_inputs(tmp_path: Path) -> None:
    """Discovery checks each (wasm, key) pair once: the inputs of a key whose wasm is of another
    circuit fail with its reason, the others stay to be proved."""
    root = _folder(tmp_path, "mul_chain_1k")
    other = _folder(root, "poseidon_k4")
    shutil.copy(DATA / "mini" / "mini.wasm", other / "circuit.wasm")
    jobs = discover_inputs(root)
    mine = {j.error for j in jobs if not j.name.startswith("poseidon_k4/")}
    theirs = {j.error for j in jobs if j.name.startswith("poseidon_k4/")}
    assert mine == {""} and len(theirs) == 1
    reason = theirs.pop()
    assert reason.startswith(f"{other / 'circuit.wasm'}: the circuit has 6 witness values but the key circuit_final.zkey "
                             "expects 1054 (nVars)"), reason


def test_discovery_wasm_beside_the_key_and_bad_entries(tmp_path: Path) -> None:
    root = _folder(tmp_path, "mul_chain_1k")
    (root / "sub").mkdir()
    (root / "sub" / "x.json").symlink_to("/etc/hostname")
    jobs = {j.name: j for j in discover_inputs(root)}
    assert sorted(jobs) == ["input_0", "input_1", "input_2", "sub/x"]
    assert jobs["input_0"].generator == str(root / "circuit.wasm") and jobs["input_0"].key == str(root / "circuit_final.zkey")
    assert jobs["input_0"].wtns == str(root / "proofs" / SCRATCH_DIR / "input_0.wtns")
    assert "outside the witness folder" in jobs["sub/x"].error
    (root / "circuit.wasm").unlink()
    assert {j.error for j in discover_inputs(root) if j.name != "sub/x"} == {f"no witness generator beside the key in {root} (a .wasm, a <name>_cpp folder written by circom --c, or its binary); pass --witness-gen"}


def test_discovery_key_in_the_parent_and_no_key_is_one_error(tmp_path: Path) -> None:
    project = _folder(tmp_path, "mul_chain_1k", with_inputs=False)
    inputs = project / "inputs"
    shutil.copytree(DATA / "mul_chain_1k" / "inputs", inputs)
    jobs = discover_inputs(inputs)
    assert {(j.key, j.generator, j.error) for j in jobs} == {(str(project / "circuit_final.zkey"), str(project / "circuit.wasm"), "")}
    (project / "circuit_final.zkey").unlink()
    with pytest.raises(FormatError, match="no key store or .zkey found for any input") as err:
        discover_inputs(inputs)
    assert "\n" not in str(err.value) and str(inputs) in str(err.value)


class _Done:
    """A future that already holds its function's result (or exception); ``held``: not done yet."""

    def __init__(self, fn: Any, args: tuple, held: bool = False) -> None:
        self.error: BaseException | None = None
        self.held = held
        try:
            self.value = fn(*args)
        except Exception as exc:
            self.error = exc

    def done(self) -> bool:
        return not self.held

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class _InlineClient:
    """Runs what InputFeed submits in this process (witnesses computed here, no worker pool);
    ``hold``: its witness tasks are not done until the test says so."""

    def __init__(self, workers: tuple[str, ...] = ("tcp://127.0.0.1:1",), hold: bool = False) -> None:
        self.workers, self.hold = workers, hold
        self.keys: list[tuple] = []
        self.witness_tasks: list[tuple[list, dict[str, Any], _Done]] = []
        """(its (input, wtns) items, its submit options, its future) per witness task, in order."""

    def nthreads(self) -> dict[str, int]:
        return {w: 1 for w in self.workers}

    def run(self, fn: Any, on_error: str = "raise") -> dict[str, Any]:
        """``fn`` on every worker: here, in this process."""
        return {w: fn() for w in self.workers}

    def submit(self, fn: Any, *args: Any, key: tuple, **kwargs: Any) -> _Done:
        self.keys.append(key)
        fut = _Done(fn, args, held=self.hold)
        if key[0] == WITNESS_GEN:
            self.witness_tasks.append((args[1], kwargs, fut))
        return fut


def test_ramp_size_starts_at_one_input_per_process_and_doubles_each_round_of_workers() -> None:
    from distprove.cluster.inputbatch import ramp_size

    assert [ramp_size(k, 16, 1, 150) for k in range(6)] == [16, 32, 64, 128, 150, 150]
    assert [ramp_size(k, 16, 2, 150) for k in range(8)] == [16, 16, 32, 32, 64, 64, 128, 128]
    assert ramp_size(0, 16, 1, 8) == 8 and ramp_size(0, 0, 1, 8) == 1  # never above the group, never empty
    assert ramp_size(10**9, 1, 1, 1024) == 1024


@pytest.mark.parametrize("chunk, in_flight, sizes", [(None, None, [4, 4, 1]), (2, None, [2, 2, 2, 2, 1]), (None, 2, [2, 2, 2, 2, 1])])
def test_witness_tasks_come_in_chunks_and_proofs_in_planned_groups(tmp_path: Path, chunk, in_flight, sizes) -> None:
    from types import SimpleNamespace

    from distprove.cluster.inputbatch import InputFeed

    root = _folder(tmp_path, "mul_chain_1k", with_inputs=False)
    good = DATA / "mul_chain_1k" / "inputs" / "input_0.json"
    for k in range(9):
        shutil.copy(good, root / f"p{k}.json")
    (root / "p4.json").write_text("not JSON")  # one bad input inside the second chunk
    jobs = discover_inputs(root)
    info = SimpleNamespace(path=jobs[0].key, n_vars=0)
    plan = SimpleNamespace(workers=("tcp://127.0.0.1:1",), proofs_per_task=lambda info, n: 4, fuses=lambda info: False)
    client, groups, failed = _InlineClient(), [], {}

    def submit(chunk_jobs: list, info: Any, i: int) -> tuple:
        assert all(Path(j.wtns).is_file() for j in chunk_jobs)
        groups.append([j.name for j in chunk_jobs])
        return object(), [], True

    def emit(job: Any, status: Any, reason: str = "", *rest: Any) -> None:
        failed[job.name] = reason
        feed.finished(job)

    with dask.config.set({"distprove.witness.processes": 4}):  # one input per process: a whole group
        feed = InputFeed(in_flight=in_flight, chunk=chunk)
        feed.start(client, [(j, info) for j in jobs], plan, submit, emit, "t")
    while feed.active:
        assert len(feed.opened) <= feed.bound
        for _, entries, _ in feed.poll():
            for job, _ in entries:
                feed.proof_done(job)
                feed.finished(job)
    # with in-flight 2, the bad p4 frees room for one input: p6 waits for room for a whole chunk
    assert [len(items) for items, _, _ in client.witness_tasks] == sizes
    assert list(failed) == ["p4"] and failed["p4"].startswith(f"{root / 'p4.json'}: not valid JSON")
    assert sorted(n for g in groups for n in g) == [f"p{k}" for k in range(9) if k != 4]
    # every proof here is done at once, so the workers are always short of work: each group takes
    # the witnesses of one task (the bad p4 left out)
    assert [len(g) for g in groups] == [n for n in (len(items) - any(Path(i).stem == "p4" for i, _ in items)
                                                    for items, _, _ in client.witness_tasks) if n]
    assert not (root / "proofs" / SCRATCH_DIR).exists() or not list((root / "proofs" / SCRATCH_DIR).glob("*.wtns"))


def test_bench_circuit_folder_gets_a_dev_key_and_its_own_witnesses(tmp_path: Path) -> None:
    """pipelines/bench_input_batch.py from a folder of an r1cs, a wasm and inputs: the dev key is
    made once (with its vk, which a proof from it passes), the witness side's witnesses are
    distprove's, byte for byte snarkjs's, one per copy."""
    from conftest import load_script
    from distprove.prover import prove

    script = load_script(Path(__file__).parents[1] / "pipelines" / "bench_input_batch.py")
    folder = tmp_path / "mini"
    (folder / "inputs").mkdir(parents=True)
    shutil.copy(DATA / "mini" / "mini.r1cs", folder / "circuit.r1cs")
    shutil.copy(DATA / "mini" / "mini.wasm", folder / "circuit.wasm")
    shutil.copy(DATA / "mini" / "input.json", folder / "inputs" / "a.json")
    key = script.circuit_key(folder, "cpu")
    assert key == folder / "dev" / "circuit.zarr" and key.is_dir()
    vk_path = folder / "dev" / "verification_key.json"
    made = vk_path.stat().st_mtime_ns
    assert script.circuit_key(folder, "cpu") == key and vk_path.stat().st_mtime_ns == made  # kept, not made again
    work = tmp_path / "work"
    work.mkdir()
    inputs, witnesses = script._folders(folder, 2, work)
    assert sorted(p.name for p in inputs.iterdir()) == ["a_0.json", "a_1.json", "circuit.wasm"]
    expected = (DATA / "mini" / "witness.wtns").read_bytes()
    assert [p.read_bytes() == expected for p in sorted(witnesses.iterdir())] == [True, True]
    proof = prove(distprove.open_key(key), witnesses / "a_0.wtns", backend="cpu")
    vk = json.loads(vk_path.read_text())
    assert distprove.verify(vk, proof.public_json(), proof.to_json())
    (folder / "circuit_final.zkey").write_bytes((DATA / "mini" / "mini_0001.zkey").read_bytes())
    assert script.circuit_key(folder, "cpu") == folder / "circuit_final.zkey"


def test_scratch_witnesses_are_written_without_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scratch witness skips the two fsyncs (they cost more than a small circuit's witness); a kept
    one has them; both are snarkjs's bytes."""
    import os

    from distprove.cluster.inputbatch import compute_witnesses

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    wasm = str(DATA / "mul_chain_1k" / "circuit.wasm")
    inp = str(DATA / "mul_chain_1k" / "inputs" / "input_1.json")
    expected = (DATA / "mul_chain_1k" / "witnesses" / "witness_1.wtns").read_bytes()
    assert compute_witnesses(wasm, [(inp, str(tmp_path / "scratch" / "a.wtns"))]) == [""]
    assert synced == [] and (tmp_path / "scratch" / "a.wtns").read_bytes() == expected
    assert compute_witnesses(wasm, [(inp, str(tmp_path / "kept" / "a.wtns"))], keep=True) == [""]
    assert len(synced) == 2 and (tmp_path / "kept" / "a.wtns").read_bytes() == expected


@pytest.mark.skipif(sys.platform != "linux", reason="niceness per thread is Linux's")
def test_witness_processes_run_nicer_than_their_worker(client) -> None:
    """The witness pool's processes run ``witness.niceness`` nicer than the worker that starts
    them (the worker's own threads feed its GPU first), in the process pool of a non-daemonic
    worker and, as a thread pool, of a daemonic one."""
    import os

    from distprove import config
    from distprove.priority import nicer
    from distprove.witness.pool import PLUGIN_NAME, WitnessPool

    def pool_and_worker_nice(dask_worker) -> tuple[int, int]:
        pool = dask_worker.executors[EXECUTOR]
        return pool.submit(os.getpriority, os.PRIO_PROCESS, 0).result(), os.getpriority(os.PRIO_PROCESS, 0)

    procs = {w: 1 for w in client.nthreads()}
    try:
        client.register_plugin(WitnessPool(procs, niceness=7), name=PLUGIN_NAME)
        assert all(pool == worker + 7 for pool, worker in client.run(pool_and_worker_nice).values())
    finally:
        client.register_plugin(WitnessPool(procs, config.get_int("witness.niceness", 0)), name=PLUGIN_NAME)
    assert config.get("witness.niceness", 0) > 0

    from concurrent.futures import ThreadPoolExecutor

    base = os.getpriority(os.PRIO_PROCESS, 0)
    with ThreadPoolExecutor(1, initializer=nicer, initargs=(3,)) as threads:
        assert threads.submit(os.getpriority, os.PRIO_PROCESS, 0).result() == base + 3
    assert os.getpriority(os.PRIO_PROCESS, 0) == base  # this thread untouched


def test_witness_processes_exit_when_their_worker_is_killed(client) -> None:
    """A worker killed outright (SIGKILL: no teardown) leaves no witness process behind: each
    exits within a few seconds of its parent, and the restarted worker gets a pool again."""
    import os
    import signal

    import psutil

    from distprove.cluster.inputbatch import ensure_witness_pool
    from distprove.witness.pool import PARENT_POLL_S

    def pool_pids(dask_worker) -> tuple[int, list[int]]:
        return os.getpid(), [p.pid for p in dask_worker.executors[EXECUTOR]._processes.values()]

    victim, (worker_pid, pids) = next(iter(client.run(pool_pids).items()))
    assert pids and all(psutil.pid_exists(p) for p in pids)
    os.kill(worker_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10 * PARENT_POLL_S
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
        assert time.monotonic() < deadline, "witness processes outlived their worker"
        time.sleep(0.1)
    client.wait_for_workers(2, timeout=60)
    ensure_witness_pool(client, discover_inputs(DATA / "mul_chain_1k" / "inputs"))  # an input batch's jobs
    assert all(pids for _, pids in client.run(pool_pids).values())


def _twenty_inputs(tmp_path: Path) -> tuple[list, Any]:
    """A mul_chain_1k folder of 20 copies of one input (p00 .. p19): its jobs and a stand-in key info."""
    from types import SimpleNamespace

    root = _folder(tmp_path, "mul_chain_1k", with_inputs=False)
    good = DATA / "mul_chain_1k" / "inputs" / "input_0.json"
    for k in range(20):
        shutil.copy(good, root / f"p{k:02d}.json")
    jobs = discover_inputs(root)
    return jobs, SimpleNamespace(path=jobs[0].key, n_vars=0)


def _poll_rounds(feed: Any, client: Any) -> list:
    """Poll until a call starts no witness task (each call starts one round); the groups returned."""
    out: list = []
    while True:
        sent = len(client.witness_tasks)
        out += feed.poll()
        if len(client.witness_tasks) == sent:
            return out


def test_a_batch_starts_with_one_input_per_witness_process(tmp_path: Path) -> None:
    """The first witness task for each worker holds one input per witness process of that worker,
    each round of them after it twice as many up to the proof group size, in falling priority (the
    pool computes them in order), and the first witness task's result alone starts the first proof
    group; witnesses that are all there by the next poll go out in whole groups."""
    from types import SimpleNamespace

    from distprove.cluster.inputbatch import WITNESS_PRIORITY, InputFeed

    jobs, info = _twenty_inputs(tmp_path)
    workers = ("tcp://127.0.0.1:1", "tcp://127.0.0.1:2")
    plan = SimpleNamespace(workers=workers, proofs_per_task=lambda info, n: 8, fuses=lambda info: False)
    client, groups = _InlineClient(workers, hold=True), []

    def submit(chunk_jobs: list, info: Any, i: int) -> tuple:
        assert all(Path(j.wtns).is_file() for j in chunk_jobs)
        groups.append([j.name for j in chunk_jobs])
        return object(), [], True

    with dask.config.set({"distprove.witness.processes": 2}):
        feed = InputFeed()
        feed.start(client, [(j, info) for j in jobs], plan, submit, lambda *a: None, "t")
    assert feed.poll() == [] and [len(items) for items, _, _ in client.witness_tasks] == [2, 2]  # one round a call
    assert _poll_rounds(feed, client) == [] and groups == []
    tasks = client.witness_tasks
    assert [len(items) for items, _, _ in tasks] == [2, 2, 4, 4, 8]
    assert [Path(inp).stem for items, _, _ in tasks for inp, _ in items] == [j.name for j in jobs]
    assert [kw["workers"] for _, kw, _ in tasks] == [[workers[k % 2]] for k in range(5)]
    priorities = [kw["priority"] for _, kw, _ in tasks]
    assert priorities[0] == WITNESS_PRIORITY and priorities == sorted(priorities, reverse=True)
    assert len(set(priorities)) == 5 and min(priorities) > len(jobs)  # above every proof's

    tasks[0][2].held = False
    assert len(feed.poll()) == 1 and groups == [["p00", "p01"]]
    for _, _, fut in tasks:
        fut.held = False
    while feed.active:
        for _, entries, _ in feed.poll():
            for job, _ in entries:
                feed.proof_done(job)
                feed.finished(job)
    assert [len(g) for g in groups] == [2, 8, 8, 2]
    assert [n for g in groups for n in g] == [j.name for j in jobs]


def test_a_smaller_proof_group_goes_out_only_while_the_workers_are_short_of_groups(tmp_path: Path) -> None:
    """Proofs whose witnesses exist go out as a group smaller than the key's only while the
    workers hold fewer than GROUPS_AHEAD unfinished groups each (or for the key's last
    witnesses); otherwise they wait for a whole group or for a group to finish."""
    from types import SimpleNamespace

    from distprove.cluster.inputbatch import GROUPS_AHEAD, InputFeed

    assert GROUPS_AHEAD == 2  # the sequence below: one proving, one queued
    jobs, info = _twenty_inputs(tmp_path)
    plan = SimpleNamespace(workers=("tcp://127.0.0.1:1",), proofs_per_task=lambda info, n: 8, fuses=lambda info: False)
    client, groups = _InlineClient(hold=True), []

    def submit(chunk_jobs: list, info: Any, i: int) -> tuple:
        groups.append(chunk_jobs)
        return object(), [], True

    with dask.config.set({"distprove.witness.processes": 2}):
        feed = InputFeed()
        feed.start(client, [(j, info) for j in jobs], plan, submit, lambda *a: None, "t")
    _poll_rounds(feed, client)
    tasks = client.witness_tasks
    assert [len(items) for items, _, _ in tasks] == [2, 4, 8, 6]

    def release(k: int) -> list[int]:
        tasks[k][2].held = False
        return [len(group) for _, group, _ in feed.poll()]

    assert release(0) == [2]  # no group out: the first witnesses go at once
    assert release(1) == [4]  # one group out: a second one queues behind it
    assert release(3) == []  # two out: the last chunk's 6 wait (8 more witnesses are coming)
    for job in groups[0]:
        feed.proof_done(job)
    assert [len(group) for _, group, _ in feed.poll()] == [6]  # a group finished: they go
    assert release(2) == [8]  # a whole group goes whatever is out
    assert not feed.active


def test_a_witness_task_waits_for_room_for_its_whole_chunk(tmp_path: Path) -> None:
    """With the in-flight bound reached, a finished proof group's room is not filled with a chunk
    cut to it: the next witness task waits until its whole chunk fits."""
    from types import SimpleNamespace

    from distprove.cluster.inputbatch import InputFeed

    jobs, info = _twenty_inputs(tmp_path)
    plan = SimpleNamespace(workers=("tcp://127.0.0.1:1",), proofs_per_task=lambda info, n: 8, fuses=lambda info: False)
    client = _InlineClient(hold=True)
    with dask.config.set({"distprove.witness.processes": 2}):
        feed = InputFeed(in_flight=6)
        feed.start(client, [(j, info) for j in jobs], plan, lambda *a: (object(), [], True), lambda *a: None, "t")
    tasks = client.witness_tasks

    def prove(entries: list) -> None:
        for _, group, _ in entries:
            for job, _ in group:
                feed.proof_done(job)
                feed.finished(job)

    assert _poll_rounds(feed, client) == [] and [len(items) for items, _, _ in tasks] == [2, 4]
    tasks[0][2].held = False
    first = feed.poll()
    assert [len(group) for _, group, _ in first] == [2]
    prove(first)
    assert feed.poll() == [] and len(tasks) == 2  # room for 2, the next chunk is 6 (8, at most the bound)
    tasks[1][2].held = False
    prove(feed.poll())
    feed.poll()
    assert [len(items) for items, _, _ in tasks] == [2, 4, 6]
    while feed.active:
        for _, _, fut in tasks:
            fut.held = False
        prove(feed.poll())
    assert [len(items) for items, _, _ in tasks] == [2, 4, 6, 6, 2]


def test_a_streamed_key_sends_each_group_as_a_witness_task_and_a_proof_task_on_one_worker(tmp_path: Path) -> None:
    """A key whose proof tasks stream: each proof group of the key's size is one witness task and
    one proof task (its specs' witnesses computed as it proves), both on the same worker; a
    worker's proof task goes out once WITNESS_LEAD witness tasks are out ahead of it (so they
    reach the worker first) and while it holds fewer than GROUPS_AHEAD open groups; the feed
    reports no input itself (a proof task reports an input that fails)."""
    from types import SimpleNamespace

    from distprove.cluster.inputbatch import GROUPS_AHEAD, WITNESS_LEAD, InputFeed

    assert (GROUPS_AHEAD, WITNESS_LEAD) == (2, 2)  # the sequence below
    jobs, info = _twenty_inputs(tmp_path)
    (Path(jobs[9].witness)).write_text("not JSON")  # a bad input in the second group
    workers = ("tcp://127.0.0.1:1", "tcp://127.0.0.1:2")
    plan = SimpleNamespace(workers=workers, proofs_per_task=lambda info, n: 4, fuses=lambda info: True)
    client, proofs, failed = _InlineClient(workers), [], []

    def submit(chunk_jobs: list, info: Any, i: int, worker: str | None = None, stream: bool = False) -> tuple:
        proofs.append(([j.name for j in chunk_jobs], worker, stream))
        return object(), [], True

    with dask.config.set({"distprove.witness.processes": 2}):
        feed = InputFeed()
        feed.start(client, [(j, info) for j in jobs], plan, submit, lambda job, *a: failed.append(job.name), "t")
    try:
        groups = feed.poll()  # one witness task per worker, no proof task yet
        assert groups == [] and [len(items) for items, _, _ in client.witness_tasks] == [4, 4]
        groups = feed.poll()  # a second one each: their first groups' proof tasks go
        assert len(groups) == 2 and [len(items) for items, _, _ in client.witness_tasks] == [4, 4, 4, 4]
        assert proofs == [(["p00", "p01", "p02", "p03"], workers[0], True), (["p04", "p05", "p06", "p07"], workers[1], True)]
        feed.poll()  # a third each (the lead refilled): the second groups' proof tasks go
        assert len(client.witness_tasks) == 5 and len(proofs) == 4  # 20 inputs: five groups
        assert [p[1] for p in proofs] == [workers[0], workers[1], workers[0], workers[1]]
        feed.poll()  # two groups open on each worker: the fifth group's proof task waits
        assert len(proofs) == 4
        for name in proofs[0][0]:
            feed.proof_done(SimpleNamespace(name=name))
        feed.poll()
        assert len(proofs) == 5 and proofs[4][1] == workers[0]
        # every witness task and its group's proof task on one worker, the groups in input order
        placed = [(tuple(Path(inp).stem for inp, _ in items), kw["workers"][0]) for items, kw, _ in client.witness_tasks]
        assert sorted(placed) == sorted((tuple(names), worker) for names, worker, _ in proofs)
        assert [n for names, _, _ in proofs for n in names] == [j.name for j in jobs]
        assert failed == [] and not feed.active
    finally:
        from distprove.witness.pool import forget_batch

        forget_batch("t")


def _good_and_bad_input(tmp_path: Path) -> tuple[str, str, Path, list[tuple[str, str]]]:
    """mul_chain_1k's wasm, a good input, a bad one and their (input, wtns) items under tmp_path."""
    wasm = str(DATA / "mul_chain_1k" / "circuit.wasm")
    good = str(DATA / "mul_chain_1k" / "inputs" / "input_1.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"x0": "not a number"}')
    return wasm, good, bad, [(good, str(tmp_path / "a.wtns")), (str(bad), str(tmp_path / "b.wtns"))]


@pytest.mark.parametrize("memory", [False, True], ids=["file", "shared"])
def test_witness_claims_compute_each_input_once_and_a_failure_names_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: bool
) -> None:
    """A witness task's inputs are claimed in this process: a proof task then takes each witness
    without computing it again (a witness task after it neither), one it takes a second time is
    computed again, a failed input raises its one line naming the input, and a batch's claims go
    at its end. Jobs hold at most JOB_VALUES values and no more than a process's share. With
    ``memory`` the proof task takes the values out of a shared slot (freed then) and no file is
    written; else it finds the witness file written."""
    from distprove.cluster.inputbatch import compute_witnesses
    from distprove.witness import pool
    from distprove.witness.pool import JOB_VALUES, WitnessFailed, WitnessSource, await_witness, forget_batch, job_size

    assert job_size(150, 1 << 16, 16) == 1 and job_size(3000, 1024, 16) == JOB_VALUES // 1024
    assert job_size(40, 1024, 16) == 3 and job_size(0, 10, 4) == 1
    computed: list[str] = []
    real = pool._calculate_chunk
    monkeypatch.setattr(pool, "_calculate_chunk",
                        lambda wasm, items, keep=False, ring=None: (computed.extend(Path(i).stem for i, *_ in items),
                                                                    real(wasm, items, keep, ring))[1])
    wasm, good, bad, items = _good_and_bad_input(tmp_path)
    shared, n_vars = (1 << 20 if memory else 0), 1023  # mul_chain_1k's witness size
    expected = read_wtns(DATA / "mul_chain_1k" / "witnesses" / "witness_1.wtns").values

    def take(inp: str, wtns: str) -> np.ndarray | None:
        return await_witness(WitnessSource(wasm, inp, False, "claims-test", shared), wtns, n_vars)

    try:
        reasons = compute_witnesses(wasm, items, n_vars, False, "claims-test", shared)
        assert reasons[0] == "" and reasons[1].startswith(f"{bad}: ")
        assert computed == ["input_1", "bad"]
        ring = pool._claims["claims-test"][items[0][1]].ring
        assert (ring is not None) == memory
        values = take(good, items[0][1])
        if memory:
            assert np.array_equal(values, expected) and not (tmp_path / "a.wtns").exists()
        else:
            assert values is None and read_wtns(tmp_path / "a.wtns").values.tolist() == expected.tolist()
        with pytest.raises(WitnessFailed) as err:
            take(str(bad), items[1][1])
        assert str(err.value) == reasons[1] and isinstance(err.value, FormatError)
        assert ring is None or ring.idle  # both slots free again: one taken, one failed
        assert computed == ["input_1", "bad"]  # taken, not computed again
        assert compute_witnesses(wasm, items[:1], n_vars, False, "claims-test", shared) == [""] and len(computed) == 2
        again = take(good, items[0][1])  # taken twice: computed again
        assert computed == ["input_1", "bad", "input_1"]
        assert np.array_equal(again, expected) if memory else again is None
        assert ring is None or ring.idle
        if not memory:
            assert (tmp_path / "a.wtns").read_bytes() == (DATA / "mul_chain_1k" / "witnesses" / "witness_1.wtns").read_bytes()
    finally:
        forget_batch("claims-test")
    assert "claims-test" not in pool._claims


def test_witnesses_lost_with_a_broken_pool_are_computed_again_each_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool job lost because a pool process died (BrokenProcessPool) leaves each of its
    witnesses to be computed again alone, in a process of its own, once however many tasks wait
    for it: a good input's witness is written (snarkjs's bytes), a bad one fails with its own
    reason, not the pool's."""
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from distprove.cluster import inputbatch
    from distprove.cluster.inputbatch import compute_witnesses
    from distprove.witness import pool
    from distprove.witness.pool import WitnessSource, forget_batch

    class BrokenPool:
        def __init__(self) -> None:
            self.jobs = 0

        def submit(self, fn: Any, *args: Any) -> Future:
            self.jobs += 1
            fut: Future = Future()
            fut.set_exception(BrokenProcessPool("A process in the process pool was terminated abruptly"))
            return fut

    broken = BrokenPool()
    monkeypatch.setattr(pool, "_pool", lambda: (broken, 2))
    monkeypatch.setattr(inputbatch, "secede", lambda: None)
    isolated: list[str] = []
    real = pool._isolated
    monkeypatch.setattr(pool, "_isolated", lambda src, wtns, where: (isolated.append(Path(src.input).stem), real(src, wtns, where))[1])
    wasm, good, bad, items = _good_and_bad_input(tmp_path)
    try:
        reasons = compute_witnesses(wasm, items, 1024, False, "broken-test")
        assert reasons[0] == "" and reasons[1].startswith(f"{bad}: ") and "pool" not in reasons[1]
        assert (tmp_path / "a.wtns").read_bytes() == (DATA / "mul_chain_1k" / "witnesses" / "witness_1.wtns").read_bytes()
        pool.await_witness(WitnessSource(wasm, good, False, "broken-test"), items[0][1], 1024)
        assert broken.jobs == 2 and isolated == ["input_1", "bad"]  # once each: the proof task took what the first wait wrote
    finally:
        forget_batch("broken-test")
        with pool._isolation_lock:
            while pool._isolation:
                pool._isolation.pop().shutdown()


def test_a_batch_goes_on_after_a_witness_process_died(client, tmp_path: Path) -> None:
    """A witness process killed outright (SIGKILL: the OOM killer's way) breaks its worker's pool;
    the next witnesses go to a new pool on that worker, and every input of the batch is proved."""
    import os
    import signal

    from distprove.cluster.inputbatch import ensure_witness_pool

    root = _folder(tmp_path, "mul_chain_1k")
    ensure_witness_pool(client, discover_inputs(root))

    def pool_pids(dask_worker) -> list[int]:
        return sorted(p.pid for p in dask_worker.executors[EXECUTOR]._processes.values())

    before = client.run(pool_pids)
    for pids in before.values():  # one process of every worker's pool
        os.kill(pids[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not all(client.run(lambda dask_worker: bool(dask_worker.executors[EXECUTOR]._broken)).values()):
        assert time.monotonic() < deadline, "the pools did not notice their processes died"
        time.sleep(0.05)
    report = distprove.batch(root, client=client, echo=None)
    assert report.ok and len(report.proved) == 3, report.summary()
    vk = DATA / "mul_chain_1k" / "verification_key.json"
    assert all(distprove.verify(vk, r.public_path, r.proof_path) for r in report.proved)
    after = client.run(pool_pids)
    assert any(set(after[w]).isdisjoint(before[w]) for w in before)  # a new pool where witnesses went


def test_a_batch_of_a_streamed_key_and_a_split_one_proves_each_input_once(tmp_path: Path) -> None:
    """Two keys in one feed, one whose proof tasks stream and one whose proofs wait for their
    witnesses: every input's proof goes out once, the first key's groups streamed on the worker
    of their witness task, the second's once their witnesses exist."""
    from dataclasses import replace
    from types import SimpleNamespace

    from distprove.cluster.inputbatch import InputFeed
    from distprove.witness.pool import forget_batch

    jobs, _ = _twenty_inputs(tmp_path)
    streamed, split = SimpleNamespace(path="A", n_vars=0), SimpleNamespace(path="B", n_vars=0)
    planned = [(replace(j, key="A"), streamed) for j in jobs[:10]] + [(replace(j, key="B"), split) for j in jobs[10:]]
    plan = SimpleNamespace(workers=("tcp://127.0.0.1:1",), proofs_per_task=lambda info, n: 4, fuses=lambda info: info.path == "A")
    client, proofs = _InlineClient(), []

    def submit(chunk_jobs: list, info: Any, i: int, worker: str | None = None, stream: bool = False) -> tuple:
        assert stream == (info.path == "A") and (worker is not None) == stream
        assert stream or all(Path(j.wtns).is_file() for j in chunk_jobs)
        proofs.append((info.path, [j.name for j in chunk_jobs]))
        return object(), [], True

    with dask.config.set({"distprove.witness.processes": 2}):
        feed = InputFeed()
        feed.start(client, planned, plan, submit, lambda *a: pytest.fail(f"nothing fails here: {a}"), "mixed")
    try:
        while feed.active:
            for _, entries, _ in feed.poll():
                for job, _ in entries:
                    feed.proof_done(job)
                    feed.finished(job)
        assert sorted(n for _, names in proofs for n in names) == sorted(j.name for j in jobs)
        assert {path for path, _ in proofs} == {"A", "B"}
        assert [len(names) for path, names in proofs if path == "A"] == [4, 4, 2]
    finally:
        forget_batch("mixed")


def test_the_report_says_when_witnesses_bound_a_batch() -> None:
    """The summary names the witnesses as the bound once the proofs waited for them a fifth of
    their proof tasks' time or more, and not below."""
    from distprove.cluster.batching import WITNESS_BOUND, BatchReport, ProofResult
    from distprove.cluster.tasks import Status

    def report(wait: float, proving: float = 10.0) -> BatchReport:
        results = [ProofResult(f"in{k}", f"in{k}.json", Status.PROVED, seconds={WITNESS_WAIT: wait, "msm": 1.0}) for k in range(4)]
        results.append(ProofResult("bad", "bad.json", Status.FAILED, "bad input", seconds={WITNESS_WAIT: 100.0}))
        return BatchReport(results, 12.0, "data", 1, {"prove-whole": proving})

    bound = report(WITNESS_BOUND * 10.0 / 4)
    assert bound.witness_wait_seconds == pytest.approx(WITNESS_BOUND * 10.0)
    assert "witnesses bound this batch: its proof tasks waited 2.00 s of their 10.00 s" in bound.summary()
    assert "witnesses bound" not in report(0.49).summary()
    assert "witnesses bound" not in report(1.0, proving=0.0).summary()
    assert report(0.0).witness_wait_seconds == 0.0
