"""Input batches on a mixed local CPU cluster: one prover and two witness workers (CPU-only
worker processes carrying the ``witness`` resource, started by
:func:`distprove.cluster.client.local_cluster`'s ``witness_workers``).

The witness workers compute every witness and prove nothing, the prover proves every proof and
computes no witness (its pool is not even started); Dask moves the witness values from one to
the other. Every proof verifies (distprove, and snarkjs when present), a bad input fails alone,
a rerun skips, and a witness worker killed mid-batch loses nothing: every input is proved
exactly once. ``distprove info`` names the witness workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest
from click.testing import CliRunner
from dask.utils import key_split
from distributed import Client, get_task_stream

import distprove
from conftest import find_snarkjs, snarkjs_verify
from distprove.cli import main
from distprove.cluster import incremental
from distprove.cluster.client import WITNESS_WORKER_PREFIX, local_cluster
from distprove.cluster.state import WITNESS_GEN
from distprove.witness.pool import EXECUTOR, WITNESS_RESOURCE, witness_workers

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def mixed() -> Iterator[Client]:
    """A local CPU cluster of one prover and two witness workers (one witness process each)."""
    with dask.config.set({"distprove.witness.processes": 1}):
        cluster = local_cluster("cpu", n_workers=1, dashboard_address=None, witness_workers=2)
    try:
        with Client(cluster) as c:
            c.wait_for_workers(3)
            yield c
    finally:
        cluster.close()


def _roles(client: Client) -> tuple[set[str], set[str]]:
    """(the provers' addresses, the witness workers' addresses)."""
    witness = set(witness_workers(client))
    return set(client.nthreads()) - witness, witness


def _circuit(root: Path, fixture: str, inputs: list[Path] | None = None) -> Path:
    """root/<fixture>/ with the fixture's key, wasm and inputs (default: the fixture's)."""
    folder = root / fixture
    folder.mkdir(parents=True)
    shutil.copy(DATA / fixture / "circuit_final.zkey", folder)
    shutil.copy(DATA / fixture / "circuit.wasm", folder)
    for p in inputs if inputs is not None else sorted((DATA / fixture / "inputs").glob("*.json")):
        shutil.copy(p, folder)
    return folder


def _where(stream: Any) -> dict[str, set[str]]:
    """Per task prefix, the workers its tasks ran on."""
    out: dict[str, set[str]] = {}
    for rec in stream.data:
        out.setdefault(key_split(rec["key"]), set()).add(rec["worker"])
    return out


def test_mixed_cluster_witness_workers_compute_the_prover_proves(mixed: Client, tmp_path: Path) -> None:
    provers, witness = _roles(mixed)
    assert len(provers) == 1 and len(witness) == 2
    names = mixed.run(lambda dask_worker: dask_worker.name)
    assert {names[w] for w in witness} == {f"{WITNESS_WORKER_PREFIX}0", f"{WITNESS_WORKER_PREFIX}1"}
    root = tmp_path / "inputs"
    _circuit(root, "mul_chain_1k")
    pos = _circuit(root, "poseidon_k4")
    (pos / "garbage.json").write_text("this is not JSON")
    out = tmp_path / "out"

    with get_task_stream(mixed) as stream:
        report = distprove.batch(root, out_dir=out, client=mixed, echo=None, announce=None)
    status = {r.name: r for r in report.results}
    assert sorted(status) == ["mul_chain_1k/input_0", "mul_chain_1k/input_1", "mul_chain_1k/input_2",
                              "poseidon_k4/garbage", "poseidon_k4/input_0", "poseidon_k4/input_1",
                              "poseidon_k4/input_2"], sorted(status)
    bad = status.pop("poseidon_k4/garbage")
    assert bad.status == "failed" and bad.reason.startswith(f"{pos / 'garbage.json'}: not valid JSON"), bad.reason
    assert all(r.status == "proved" for r in status.values()), report.summary()
    assert report.workers == 1 and report.witness_workers == 2 and "1 workers, 2 witness workers" in report.summary()

    where = _where(stream)
    assert where[WITNESS_GEN] <= witness, where
    assert where["prove-whole"] == provers, where
    # the provers' pools were never started: every witness came from a witness worker
    pools = mixed.run(lambda dask_worker: EXECUTOR in dask_worker.executors)
    assert {w for w, has in pools.items() if has} == witness, pools

    snarkjs = find_snarkjs()
    for fixture in ("mul_chain_1k", "poseidon_k4"):
        vk = DATA / fixture / "verification_key.json"
        for k in range(3):
            proof, public = out / fixture / f"input_{k}.proof.json", out / fixture / f"input_{k}.public.json"
            assert distprove.verify(vk, public, proof)
            want = json.loads((DATA / fixture / "public" / f"public_{k}.json").read_text())
            assert json.loads(public.read_text()) == want
            if snarkjs:
                assert snarkjs_verify(vk, public, proof, snarkjs)
    assert not list(out.rglob("*.wtns")) and not list(out.rglob("*.tmp*"))

    with get_task_stream(mixed) as again_stream:
        again = distprove.batch(root, out_dir=out, client=mixed, echo=None, announce=None)
    assert {r.name: r.status for r in again.results if r.name != "poseidon_k4/garbage"} == {n: "skipped" for n in status}
    # only the bad input is tried again
    assert {rec["key"][1] for rec in again_stream.data if key_split(rec["key"]) == WITNESS_GEN} == {"poseidon_k4/garbage"}
    adopted = incremental.batch(root, out_dir=out, client=mixed, echo=None, announce=None)
    assert {r.name: r.status for r in adopted.results if r.name != "poseidon_k4/garbage"} == {n: "skipped" for n in status}


def test_kept_witnesses_are_written_by_the_prover(mixed: Client, tmp_path: Path) -> None:
    """keep_witnesses: the proof task writes each witness it was handed beside its proof, the
    same bytes as ``distprove wtns calculate`` gives."""
    root = _circuit(tmp_path / "in", "mul_chain_1k")
    out = tmp_path / "out"
    report = distprove.batch(root, out_dir=out, client=mixed, echo=None, announce=None, keep_witnesses=True)
    assert report.ok and len(report.proved) == 3, report.summary()
    for k in range(3):
        calculated = tmp_path / f"input_{k}.wtns"
        res = CliRunner().invoke(main, ["wtns", "calculate", str(root / "circuit.wasm"), str(root / f"input_{k}.json"), str(calculated)])
        assert res.exit_code == 0, res.output
        assert (out / f"input_{k}.wtns").read_bytes() == calculated.read_bytes()


def _witness_tasks(dask_scheduler: Any, computing: bool) -> list[tuple[str, Any]]:
    """(worker, key) of the witness tasks running (``computing``) or whose values a worker holds."""
    out = []
    for ts in dask_scheduler.tasks.values():
        if isinstance(ts.key, tuple) and ts.key[0] == WITNESS_GEN:
            if computing and ts.state == "processing" and ts.processing_on is not None:
                out.append((ts.processing_on.address, ts.key))
            elif not computing and ts.state == "memory":
                out += [(ws.address, ts.key) for ws in ts.who_has]
    return sorted(out)


@pytest.mark.parametrize("role", ["witness", "prover"])
def test_a_worker_killed_mid_batch_loses_nothing(mixed: Client, tmp_path: Path, role: str) -> None:
    """SIGKILL, mid-batch, of a witness worker computing a witness task, or of the prover (holding
    witness values it fetched): Dask computes the lost witness tasks again (on the other witness
    worker, or on the one its nanny restarts); the proof tasks follow the prover
    its nanny restarts at a new address (:mod:`distprove.cluster.provers`), and every input is
    proved exactly once."""
    src = tmp_path / "src"
    src.mkdir()
    n = 8  # every witness in flight at once (in-flight 8): the kill comes at the first, the batch has them all to do
    for k in range(n):
        (src / f"x{k:02d}.json").write_text(json.dumps({"x0": str(k + 3)}))
    root = _circuit(tmp_path / "in", "mul_chain_1k", sorted(src.glob("*.json")))
    out = tmp_path / "out"
    pids = mixed.run(os.getpid)
    provers, witness = _roles(mixed)
    targets = witness if role == "witness" else provers
    killed: list[tuple[str, Any]] = []
    done = threading.Event()

    def kill() -> None:  # the first witness worker seen computing, or the prover holding witness values
        while not done.is_set() and not killed:
            seen = [(w, k) for w, k in mixed.run_on_scheduler(_witness_tasks, computing=role == "witness") if w in targets]
            if seen:
                os.kill(pids[seen[0][0]], signal.SIGKILL)
                killed.append(seen[0])
            time.sleep(0.01)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    try:
        with get_task_stream(mixed) as stream, dask.config.set({"distprove.witness.in-flight": 8}):
            report = distprove.batch(root, out_dir=out, client=mixed, echo=None, announce=None)
    finally:
        done.set()
        killer.join()
    assert killed, f"no {role} was seen computing or holding witness values"
    names = [r.name for r in report.results]
    assert sorted(names) == sorted(f"x{k:02d}" for k in range(n)) and len(set(names)) == n
    assert report.ok and len(report.proved) == n, report.summary()
    where = _where(stream)
    assert not where["prove-whole"] & set(witness_workers(mixed)) and not where["prove-whole"] & witness, where
    assert where[WITNESS_GEN] <= set(witness_workers(mixed)) | witness, where
    if role == "witness":  # the task it was computing was computed again elsewhere
        victim, key = killed[0]
        assert [rec["worker"] for rec in stream.data if rec["key"] == key and rec["worker"] != victim], (killed, stream.data)
    else:  # the proofs went on on the restarted prover
        assert where["prove-whole"] - provers, where
    vk = DATA / "mul_chain_1k" / "verification_key.json"
    assert sorted(p.name for p in out.glob("*.proof.json")) == sorted(f"x{k:02d}.proof.json" for k in range(n))
    for k in (0, n // 2, n - 1):
        assert distprove.verify(vk, out / f"x{k:02d}.public.json", out / f"x{k:02d}.proof.json")
    mixed.wait_for_workers(3)


def test_on_provers_lets_the_provers_compute_too(mixed: Client, tmp_path: Path) -> None:
    """``distprove.witness.on-provers: true``: witness tasks go to every worker in turn (the
    provers' pools started too), the proofs still only to the prover."""
    root = _circuit(tmp_path / "in", "mul_chain_1k")
    provers, witness = _roles(mixed)
    with get_task_stream(mixed) as stream, dask.config.set({"distprove.witness.on-provers": True,
                                                            "distprove.witness.chunk": 1}):
        report = distprove.batch(root, out_dir=tmp_path / "out", client=mixed, echo=None, announce=None)
    assert report.ok and len(report.proved) == 3, report.summary()
    assert all(mixed.run(lambda dask_worker: EXECUTOR in dask_worker.executors).values())
    where = _where(stream)
    assert where["prove-whole"] <= provers and where[WITNESS_GEN] <= provers | witness, where
    vk = DATA / "mul_chain_1k" / "verification_key.json"
    assert all(distprove.verify(vk, tmp_path / "out" / f"input_{k}.public.json", tmp_path / "out" / f"input_{k}.proof.json")
               for k in range(3))
    with dask.config.set({"distprove.witness.on-provers": False}):  # the provers' pools go again
        distprove.batch(root, out_dir=tmp_path / "out", client=mixed, echo=None, announce=None)
    pools = mixed.run(lambda dask_worker: EXECUTOR in dask_worker.executors)
    assert {w for w, has in pools.items() if has} == witness, pools


def test_info_names_the_witness_workers(mixed: Client) -> None:
    res = CliRunner().invoke(main, ["info", "--scheduler", mixed.scheduler.address])
    assert res.exit_code == 0, res.output
    assert res.output.count("witness worker: computes witnesses in 1 processes, proves nothing") == 2, res.output


def test_on_provers_false_without_witness_workers_is_one_line(tmp_path: Path) -> None:
    from distprove.cluster.inputbatch import on_provers
    from distprove.errors import FormatError

    with dask.config.set({"distprove.witness.on-provers": False}):
        with pytest.raises(FormatError, match="on-provers: is false but the cluster has no witness workers"):
            on_provers({})
        assert on_provers({"tcp://w": 2}) is False
    assert on_provers({}) is True and on_provers({"tcp://w": 2}) is False
    with dask.config.set({"distprove.witness.on-provers": True}):
        assert on_provers({"tcp://w": 2}) is True
    assert WITNESS_RESOURCE == "witness"


def test_a_provers_share_is_of_its_own_hosts_cores(mixed: Client) -> None:
    """Each host's cores as its workers read them (not the client's): two workers on a host of 16
    cores get 8 processes each, one alone on a host of 6 gets 6; a witness worker keeps its
    resource's amount, and without the provers' pools a prover gets none."""
    from distprove.witness.pool import host_cores, processes_for

    seen = host_cores(mixed)
    assert set(seen) == set(mixed.nthreads()) and all(n >= 1 for n in seen.values()), seen
    nthreads = {"tcp://10.0.0.1:1": 1, "tcp://10.0.0.1:2": 1, "tcp://10.0.0.2:1": 1, "tcp://10.0.0.3:1": 1}
    cores = {"tcp://10.0.0.1:1": 16, "tcp://10.0.0.1:2": 16, "tcp://10.0.0.2:1": 6, "tcp://10.0.0.3:1": 4}
    with dask.config.set({"distprove.witness.processes": None}):
        procs = processes_for(nthreads, cores, {"tcp://10.0.0.3:1": 3})
        assert procs == {"tcp://10.0.0.1:1": 8, "tcp://10.0.0.1:2": 8, "tcp://10.0.0.2:1": 6, "tcp://10.0.0.3:1": 3}
        assert processes_for(nthreads, cores, {"tcp://10.0.0.3:1": 3}, provers=False)["tcp://10.0.0.1:1"] == 0
    with dask.config.set({"distprove.witness.processes": 2}):
        assert processes_for(nthreads, cores)["tcp://10.0.0.2:1"] == 2
