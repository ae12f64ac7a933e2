"""distprove.batch on a CPU LocalCluster of 3 single-threaded worker processes.

A mixed batch (mini from a zarr key store, mul_chain_1k from its .zkey, one subfolder each, plus
bad witnesses) proves in both planner modes, data mode both fused (one prove-whole task per
proof, the default for these small keys) and as prepare / MSM / reducer tasks; outputs appear while the batch runs, verify with
distprove and snarkjs, and a rerun skips them; a killed worker loses nothing and duplicates
nothing; ``batch(witness_dir)`` alone finds the key and writes to proofs/.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dask
import pytest
from click.testing import CliRunner

import distprove
import distprove.cluster.graph
import distprove.cluster.planner
from conftest import local_client, snarkjs_verify
from distprove.witness.discovery import discover
from distprove.keystore import import_key
from distprove.verifier import verify_many
from distprove.cluster.output import write_once
from distprove.cluster.state import PLUGIN_NAME, ProverState

DATA = Path(__file__).parent / "data"
MINI_ZKEY = DATA / "mini" / "mini_0001.zkey"
MINI_WTNS = DATA / "mini" / "witness.wtns"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
MUL_WTNS = sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))
BAD = DATA / "bad"
VK = {"mini": DATA / "mini" / "verification_key.json", "mul": DATA / "mul_chain_1k" / "verification_key.json"}


@pytest.fixture(scope="module")
def client():
    yield from local_client(3)


@pytest.fixture(scope="module")
def mini_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_key(MINI_ZKEY, tmp_path_factory.mktemp("store") / "mini.zarr").path


def make_layout(root: Path, mini_store: Path, n_mini: int = 8, n_mul: int = 4, bad: bool = True) -> dict[str, str]:
    """witness_dir with mini/ (a key store) and mul/ (a .zkey); returns {witness name: key kind}."""
    names: dict[str, str] = {}
    (root / "mini").mkdir(parents=True)
    shutil.copytree(mini_store, root / "mini" / "mini.zarr")
    for i in range(n_mini):
        shutil.copy(MINI_WTNS, root / "mini" / f"m{i:02d}.wtns")
        names[f"mini/m{i:02d}"] = "mini"
    if n_mul:
        (root / "mul").mkdir()
        shutil.copy(MUL_ZKEY, root / "mul" / "circuit_final.zkey")
        for i in range(n_mul):
            shutil.copy(MUL_WTNS[i % len(MUL_WTNS)], root / "mul" / f"w{i}.wtns")
            names[f"mul/w{i}"] = "mul"
    if bad:
        shutil.copy(BAD / "unsatisfied.wtns", root / "mini" / "unsatisfied.wtns")
        shutil.copy(BAD / "truncated.wtns", root / "mini" / "truncated.wtns")
        shutil.copy(MINI_WTNS, root / "orphan.wtns")  # no key beside it
    return names


def outputs(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")}


def expected_outputs(names: dict[str, str]) -> set[str]:
    return {f"{n}.{kind}.json" for n in names for kind in ("proof", "public")}


class Watcher:
    """Records, from a thread, when each proof file first appears and its inode."""

    def __init__(self, out: Path) -> None:
        self.out, self.seen, self._stop = out, {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in self.out.rglob("*.proof.json") if self.out.exists() else ():
                self.seen.setdefault(p, (time.monotonic(), p.stat().st_ino))
            time.sleep(0.02)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return self.seen


GRAPHS = {
    # fuse-below (2^23) is above both keys' domains
    "fused": ("data", {"distprove.planner.proofs-per-task": 1, "distprove.planner.proofs-per-writing-task": 1}),
    # several fused proofs per task (a task that writes its proofs takes proofs-per-writing-task)
    "grouped": ("data", {"distprove.planner.proofs-per-task": 3, "distprove.planner.proofs-per-writing-task": 3}),
    "data": ("data", {"distprove.planner.fuse-below": None}),
    "split": ("split", {}),
}
"""Each graph the fixture batch runs under: (planner mode, dask config)."""

DATA_MODES = ["fused", "grouped", "data"]
FUSED = {"fused", "grouped"}


@contextlib.contextmanager
def graph_config(graph: str) -> Iterator[list[list[str]]]:
    """The configuration of ``graph``; "grouped" also lets a dozen witnesses on 3 workers form
    groups (the planner keeps 8 tasks per worker otherwise). Yields the names of each
    prove-group task submitted."""
    groups: list[list[str]] = []
    real = distprove.cluster.graph.submit_group

    def recorded(client, specs, *args, **kw):
        groups.append([sp.name for sp in specs])
        return real(client, specs, *args, **kw)

    with dask.config.set(GRAPHS[graph][1]), pytest.MonkeyPatch.context() as mp:
        mp.setattr(distprove.cluster.graph, "submit_group", recorded)
        if graph == "grouped":
            mp.setattr(distprove.cluster.planner, "TASKS_PER_WORKER", 1)
            mp.setattr(distprove.cluster.planner, "CHECKED_TASKS_PER_WORKER", 1)
        yield groups


@pytest.fixture(scope="module", params=list(GRAPHS))
def proved(request, client, mini_store, tmp_path_factory):
    """One mixed batch per graph (split also computes H by four-step on all workers)."""
    graph = request.param
    mode, settings = GRAPHS[graph]
    root = tmp_path_factory.mktemp(f"batch-{graph}")
    wdir, out = root / "witnesses", root / "out"
    names = make_layout(wdir, mini_store)
    seen_during: list[tuple[str, bool, int]] = []

    def on_result(res) -> None:  # runs in the client while the batch is still going
        seen_during.append((res.name, Path(res.proof_path).exists(), len(seen_during)))

    watcher = Watcher(out)
    with graph_config(graph) as groups:
        report = distprove.batch(
            wdir, out_dir=out, client=client, mode=mode, backend="cpu", fourstep_min_domain=1024, on_result=on_result, echo=None
        )
    end = time.monotonic()
    return {"graph": graph, "mode": mode, "settings": settings, "groups": groups, "root": root, "wdir": wdir, "out": out, "names": names, "report": report,
            "during": seen_during, "seen": watcher.stop(), "end": end}


def test_batch_proves_all_and_fails_bad_alone(proved) -> None:
    report, names, out = proved["report"], proved["names"], proved["out"]
    assert report.mode == proved["mode"] and report.workers == 3
    assert sorted(r.name for r in report.proved) == sorted(names)
    reasons = {r.name: r.reason for r in report.failed}
    assert set(reasons) == {"mini/unsatisfied", "mini/truncated", "orphan"}
    assert "does not verify" in reasons["mini/unsatisfied"]
    assert "truncated.wtns: " in reasons["mini/truncated"] and "\n" not in reasons["mini/truncated"]
    assert "no key store or .zkey" in reasons["orphan"]
    assert outputs(out) == expected_outputs(names)  # nothing written for the failures
    assert report.proofs_per_second > 0 and not report.ok
    graph = set(report.stage_seconds) - {"check-outputs", "plan-key"}
    if proved["graph"] in FUSED:  # one task per proof (or group), which checks and writes its proofs
        assert graph == {"prove-whole"}
    else:
        assert {"prove-prepare", "msm-windows", "reduce", "verify-write"} <= graph and "prove-whole" not in graph
    # fused: a prove-whole task per proof; grouped: the ten mini witnesses (two bad, failing
    # alone inside their groups) in threes and a last one alone, mul's four alone (too few to
    # group and balance on 3 workers)
    sizes = sorted(len(g) for g in proved["groups"])
    assert sizes == {"fused": [1] * 14, "grouped": [1] * 5 + [3] * 3}.get(proved["graph"], [])
    if proved["mode"] == "split":
        assert "ntt-columns" in report.stage_seconds and "ntt-rows-forward" in report.stage_seconds
    assert "FAILED mini/unsatisfied" in report.summary()
    # data: the MSMs overlapped in one task (fused: H computed beside them, as prove() does)
    msm = {"msm_A", "msm_B2", "msm_H"} if proved["mode"] == "split" else {"msm"} if proved["graph"] in FUSED else {"msm", "ntt"}
    stages = {"witness", "gather", "assemble", "check", "write"} | msm
    assert all(stages <= set(r.seconds) for r in report.proved)


def test_outputs_appear_while_the_batch_runs(proved) -> None:
    during = [d for d in proved["during"] if d[0] in proved["names"]]
    assert during and all(exists for _, exists, _ in during)
    first = min(t for t, _ in proved["seen"].values())
    assert first < proved["end"] - 0.05
    assert during[0][2] < len(proved["report"].results) - 1  # reported well before the last result


def test_every_proof_verifies(proved) -> None:
    out, names = proved["out"], proved["names"]
    items = [(VK[kind], out / f"{n}.public.json", out / f"{n}.proof.json") for n, kind in names.items()]
    assert verify_many(items) == [True] * len(items)


def test_snarkjs_accepts_one_proof_per_key(proved, snarkjs: str) -> None:
    out, names = proved["out"], proved["names"]
    for kind in ("mini", "mul"):
        n = next(n for n, k in names.items() if k == kind)
        assert snarkjs_verify(VK[kind], out / f"{n}.public.json", out / f"{n}.proof.json", snarkjs)


def test_rerun_skips_verified_outputs_and_keys_stay_resident(proved, client) -> None:
    out, names = proved["out"], proved["names"]
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.rglob("*.json")}
    resident = client.run(lambda dask_worker: list(dask_worker.plugins[PLUGIN_NAME].resident))
    # One output damaged: that witness alone is proved again.
    victim = out / "mini" / "m03.proof.json"
    victim.write_text(json.dumps({"pi_a": "nonsense"}))
    with dask.config.set(proved["settings"]):
        report = distprove.batch(proved["wdir"], out_dir=out, client=client, mode=proved["mode"], backend="cpu", echo=None)
    assert sorted(r.name for r in report.skipped) == sorted(set(names) - {"mini/m03"})
    assert [r.name for r in report.proved] == ["mini/m03"]
    assert {r.name for r in report.failed} == {"mini/unsatisfied", "mini/truncated", "orphan"}
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.rglob("*.json")}
    assert {p for p in before if before[p] != after[p]} <= {victim, out / "mini" / "m03.public.json"}
    assert verify_many([(VK["mini"], out / "mini" / "m03.public.json", victim)]) == [True]
    assert ("prove-whole" in report.stage_seconds) == (proved["graph"] in FUSED)
    # The worker state was not re-registered: keys read in the first batch are still resident.
    again = client.run(lambda dask_worker: list(dask_worker.plugins[PLUGIN_NAME].resident))
    for addr, hashes in resident.items():
        assert set(hashes) <= set(again[addr])


def wait_replaced(client, victim: str, n: int, timeout: float = 120) -> None:
    """Until the scheduler has dropped the killed worker ``victim`` and has ``n`` workers again
    (its nanny's new process among them). A batch can end before the scheduler has seen the
    kill (the victim had nothing left to do), and ``wait_for_workers(n)`` would then count the
    dead worker and let ``client.run`` try to reach it; a loaded machine starts the new process
    slowly, hence the long timeout."""
    deadline = time.monotonic() + timeout
    while victim in (workers := client.nthreads()) or len(workers) < n:
        assert time.monotonic() < deadline, f"{victim} not replaced after {timeout:.0f} s: {sorted(workers)}"
        time.sleep(0.05)


@pytest.mark.parametrize("graph", DATA_MODES)
def test_killed_worker_leaves_every_proof_written_once(client, mini_store, tmp_path, graph: str) -> None:
    wdir, out = tmp_path / "w", tmp_path / "out"
    names = make_layout(wdir, mini_store, n_mini=7, n_mul=2, bad=False)
    pids = client.run(os.getpid)
    killed: list[str] = []

    def on_result(res) -> None:
        if not killed:
            busy = {a: len(ts) for a, ts in client.processing().items() if a in pids}
            victim = max(busy, key=busy.get)
            os.kill(pids[victim], signal.SIGKILL)  # the worker process; its nanny starts a new one
            killed.append(victim)

    watcher = Watcher(out)
    with graph_config(graph):
        report = distprove.batch(wdir, out_dir=out, client=client, mode="data", backend="cpu", on_result=on_result, echo=None)
    seen = watcher.stop()
    assert killed
    assert ("prove-whole" in report.stage_seconds) == (graph in FUSED)
    assert sorted(r.name for r in report.proved) == sorted(names), report.summary()
    assert outputs(out) == expected_outputs(names)
    for p, (_, ino) in seen.items():
        assert p.stat().st_ino == ino  # never replaced after it first appeared
    items = [(VK[k], out / f"{n}.public.json", out / f"{n}.proof.json") for n, k in names.items()]
    assert verify_many(items) == [True] * len(items)
    wait_replaced(client, killed[0], 3)
    assert pids[killed[0]] not in client.run(os.getpid).values()  # the process really died


def test_cli_batch(client, tmp_path) -> None:
    from distprove.cli import main

    wdir = tmp_path / "w"
    wdir.mkdir()
    for i in range(2):
        shutil.copy(MINI_WTNS, wdir / f"m{i}.wtns")
    shutil.copy(BAD / "unsatisfied.wtns", wdir / "bad.wtns")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main,
        ["batch", str(MINI_ZKEY), str(wdir), "--out", str(out), "--scheduler", client.scheduler.address,
         "--backend", "cpu", "--report", str(tmp_path / "report.json")],
    )
    assert res.exit_code == 1, res.output
    assert "proved 2, failed 1, skipped 0" in res.output and "FAILED bad: " in res.output
    assert outputs(out) == {f"m{i}.{k}.json" for i in range(2) for k in ("proof", "public")}
    assert json.loads((tmp_path / "report.json").read_text())["proved"] == 2


def test_batch_with_nothing_but_the_witness_dir(tmp_path) -> None:
    """Key beside the witnesses, outputs to proofs/, a local cluster made and closed by batch()."""
    for i in range(2):
        shutil.copy(MINI_WTNS, tmp_path / f"w{i}.wtns")
    shutil.copy(MINI_ZKEY, tmp_path / "mini.zkey")
    report = distprove.batch(tmp_path)
    assert isinstance(report, distprove.BatchReport) and len(report.proved) == 2
    out = tmp_path / "proofs"
    assert outputs(out) == {f"w{i}.{k}.json" for i in range(2) for k in ("proof", "public")}
    assert verify_many([(VK["mini"], out / f"w{i}.public.json", out / f"w{i}.proof.json") for i in range(2)]) == [True] * 2


# --- no cluster needed ---------------------------------------------------------------------------


def test_discover_matches_keys(tmp_path, mini_store) -> None:
    names = make_layout(tmp_path / "w", mini_store, n_mini=2, n_mul=1)
    jobs = {j.name: j for j in discover(tmp_path / "w")}
    assert set(jobs) == set(names) | {"mini/unsatisfied", "mini/truncated", "orphan"}
    assert jobs["mini/m00"].key.endswith("mini.zarr") and jobs["mul/w0"].key.endswith("circuit_final.zkey")
    assert jobs["orphan"].key is None and "no key" in jobs["orphan"].error
    assert jobs["mul/w0"].proof_path == str((tmp_path / "w" / "proofs" / "mul" / "w0.proof.json").resolve())
    # Two .zkey files in one folder: ambiguous, one error for the batch naming the folder and both.
    shutil.copy(MINI_ZKEY, tmp_path / "w" / "mul" / "other.zkey")
    with pytest.raises(distprove.FormatError, match="2 keys in one folder") as err:
        discover(tmp_path / "w")
    assert str(tmp_path / "w" / "mul") in str(err.value) and "other.zkey" in str(err.value) and "\n" not in str(err.value)
    # key= and the configuration override discovery.
    with dask.config.set({"distprove.key": str(MINI_ZKEY)}):
        assert {j.key for j in discover(tmp_path / "w")} == {str(MINI_ZKEY.resolve())}
    assert {j.key for j in discover(tmp_path / "w", key=MUL_ZKEY)} == {str(MUL_ZKEY.resolve())}
    with pytest.raises(distprove.FormatError, match="no \\*.wtns"):
        discover(tmp_path / "w" / "mini" / "mini.zarr")


def project(root: Path, key_in: str | None, n: int = 3) -> Path:
    """root/witnesses/w<i>.wtns with the mini .zkey in root/witnesses ("folder"), root ("parent") or nowhere."""
    wdir = root / "witnesses"
    wdir.mkdir(parents=True)
    for i in range(n):
        shutil.copy(MINI_WTNS, wdir / f"w{i}.wtns")
    if key_in is not None:
        shutil.copy(MINI_ZKEY, (wdir if key_in == "folder" else root) / "circuit.zkey")
    return wdir


@pytest.mark.parametrize("key_in", ["folder", "parent"])
def test_key_beside_the_witness_folder_or_in_its_parent(tmp_path, key_in: str) -> None:
    """project/circuit.zkey with project/witnesses/*.wtns is found, as is a key inside the folder;
    the folder's own key wins over its parent's."""
    wdir = project(tmp_path, key_in)
    where = wdir if key_in == "folder" else tmp_path
    jobs = discover(wdir)
    assert [j.key for j in jobs] == [str(where.resolve() / "circuit.zkey")] * 3 and not any(j.error for j in jobs)
    if key_in == "parent":
        shutil.copy(MINI_ZKEY, wdir / "own.zkey")
        assert {j.key for j in discover(wdir)} == {str(wdir.resolve() / "own.zkey")}


def test_no_key_anywhere_is_one_error_naming_the_folders_searched(tmp_path) -> None:
    wdir = project(tmp_path, None)
    with pytest.raises(distprove.FormatError) as err:
        discover(wdir)
    msg = str(err.value)
    assert "no key store or .zkey found for any witness" in msg and "\n" not in msg
    assert f"searched {wdir.resolve()}, {tmp_path.resolve()})" in msg
    # Keys further up are not looked for (only the witness folder's parent).
    shutil.copy(MINI_ZKEY, tmp_path.parent / f"{tmp_path.name}-sibling.zkey")
    with pytest.raises(distprove.FormatError, match="for any witness"):
        discover(wdir)


def test_two_keys_in_the_parent_are_one_error(tmp_path) -> None:
    wdir = project(tmp_path, "parent")
    shutil.copy(MUL_ZKEY, tmp_path / "other.zkey")
    with pytest.raises(distprove.FormatError, match="2 keys in one folder \\(circuit.zkey, other.zkey\\)"):
        discover(wdir)


SCRIPT = """import distprove
{guard}{indent}report = distprove.batch({wdir!r}, backend="cpu", n_workers=1)
{indent}print(report)
"""


@pytest.mark.parametrize("guarded", [True, False])
def test_batch_from_a_script(tmp_path, guarded: bool) -> None:
    """The README's snippet as a script: with the `if __name__ == "__main__":` guard it proves the
    bundled example (key in the witness folder's parent) and the report prints once; without it,
    one line says what to add, exit status 1, no traceback, nothing started."""
    from distprove import example

    wdir = tmp_path / "project" / "witnesses"
    shutil.copytree(example.WITNESS_DIR, wdir)
    shutil.copy(example.ZKEY, wdir.parent / "circuit.zkey")
    guard = 'if __name__ == "__main__":\n' if guarded else ""
    script = tmp_path / "prove_all.py"
    script.write_text(SCRIPT.format(guard=guard, indent="    " if guarded else "", wdir=str(wdir)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(distprove.__file__).parents[1]), os.environ.get("PYTHONPATH")]))}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert "Traceback" not in res.stderr, res.stderr
    if guarded:
        assert res.returncode == 0, res.stderr
        assert (res.stdout + res.stderr).count("proved 3, failed 0, skipped 0") == 1, res.stdout
        assert len(list((wdir / "proofs").glob("*.proof.json"))) == 3
    else:
        assert res.returncode == 1
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, res.stderr
        assert lines[0].startswith(f"error: {script}, line 2: ") and 'if __name__ == "__main__":' in lines[0]
        assert not (wdir / "proofs").exists()


def test_write_once(tmp_path) -> None:
    proof, public = tmp_path / "a.proof.json", tmp_path / "a.public.json"
    assert write_once({"n": 1}, ["7"], str(proof), str(public))
    ino = proof.stat().st_ino
    assert not write_once({"n": 2}, ["7"], str(proof), str(public))
    assert json.loads(proof.read_text()) == {"n": 1} and proof.stat().st_ino == ino
    # A public file left by an attempt that died before its proof is replaced whole.
    proof2, public2 = tmp_path / "b.proof.json", tmp_path / "b.public.json"
    public2.write_text("[")
    assert write_once({"n": 3}, ["8"], str(proof2), str(public2))
    assert json.loads(public2.read_text()) == ["8"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (proof, public, proof2, public2))


def test_worker_state_lru(tmp_path, mini_store) -> None:
    from test_worker_cache import FakeWorker

    st = ProverState("cpu", max_keys=1)
    st.setup(FakeWorker())
    a = st.key(str(mini_store))
    assert st.key(str(mini_store)) is a and st.resident == [a.content_hash]
    assert st.resident_paths == {a.content_hash: str(mini_store)}
    b = st.key(str(MUL_ZKEY))
    assert st.resident == [b.content_hash]
    assert a.domain_size == 8 and a.a.shape == (a.n_vars, 16) and a.__dict__["a"] is a.a  # read once, kept


def test_ready_proofs_share_one_pairing_check(client, tmp_path) -> None:
    """Proofs of separate reducers (the three-task graph) that are ready together are checked by
    one verify-write task (verify_many), not one each (fused groups check their own proofs)."""
    from distributed import get_task_stream

    for i in range(6):
        shutil.copy(MINI_WTNS, tmp_path / f"m{i}.wtns")
    with get_task_stream(client) as ts, dask.config.set({"distprove.planner.fuse-below": None}):
        report = distprove.batch(
            tmp_path, key=MINI_ZKEY, client=client, backend="cpu", verify_group=6, verify_wait=60, echo=None
        )
    assert len(report.proved) == 6
    groups = {rec["key"] for rec in ts.data if rec["key"][0] == "verify-write"}
    assert 1 <= len(groups) < 6
    out = tmp_path / "proofs"
    assert verify_many([(VK["mini"], out / f"m{i}.public.json", out / f"m{i}.proof.json") for i in range(6)]) == [True] * 6


def test_bad_key_and_wrong_circuit_fail_alone(client, tmp_path) -> None:
    (tmp_path / "good").mkdir()
    (tmp_path / "badkey").mkdir()
    shutil.copy(MINI_ZKEY, tmp_path / "good" / "mini.zkey")
    shutil.copy(MINI_WTNS, tmp_path / "good" / "ok.wtns")
    shutil.copy(MUL_WTNS[0], tmp_path / "good" / "other_circuit.wtns")  # nVars does not match the key
    shutil.copy(BAD / "truncated_half.zkey", tmp_path / "badkey" / "half.zkey")
    shutil.copy(MINI_WTNS, tmp_path / "badkey" / "w.wtns")
    report = distprove.batch(tmp_path, client=client, backend="cpu", echo=None)
    assert [r.name for r in report.proved] == ["good/ok"]
    reasons = {r.name: r.reason for r in report.failed}
    assert set(reasons) == {"good/other_circuit", "badkey/w"}
    assert reasons["good/other_circuit"].startswith(str(tmp_path / "good" / "other_circuit.wtns") + ": ")
    assert "nVars" in reasons["good/other_circuit"]
    assert "half.zkey: " in reasons["badkey/w"] and "\n" not in reasons["badkey/w"]
    assert outputs(tmp_path / "proofs") == {"good/ok.proof.json", "good/ok.public.json"}


@pytest.mark.parametrize("graph", sorted(FUSED))
def test_unchecked_fused_proofs_are_written_by_their_own_tasks(client, tmp_path, graph: str) -> None:
    """verify=False: a prove-whole task writes its proofs itself (no verify-write tasks); a bad
    witness still fails alone with its one-line reason."""
    for i in range(6):
        shutil.copy(MINI_WTNS, tmp_path / f"m{i}.wtns")
    shutil.copy(BAD / "truncated.wtns", tmp_path / "m3t.wtns")  # sorted among the good ones: inside a group
    with graph_config(graph) as groups:
        report = distprove.batch(tmp_path, key=MINI_ZKEY, client=client, backend="cpu", verify=False, echo=None)
    assert set(report.stage_seconds) - {"check-outputs", "plan-key"} == {"prove-whole"}
    assert sorted(r.name for r in report.proved) == [f"m{i}" for i in range(6)]
    assert not report.checked and report.summary().count("verify off: no proof was checked") == 1
    (failed,) = report.failed
    assert failed.name == "m3t" and failed.reason.startswith(str(tmp_path / "m3t.wtns") + ": ") and "\n" not in failed.reason
    assert sorted(len(g) for g in groups) == ([1, 2, 2, 2] if graph == "grouped" else [1] * 7)  # 7 // 3 workers
    out = tmp_path / "proofs"
    assert outputs(out) == {f"m{i}.{k}.json" for i in range(6) for k in ("proof", "public")}
    assert verify_many([(VK["mini"], out / f"m{i}.public.json", out / f"m{i}.proof.json") for i in range(6)]) == [True] * 6
    assert all({"witness", "msm", "assemble", "write"} <= set(r.seconds) and r.worker.startswith("tcp://") for r in report.proved)


@pytest.mark.parametrize("graph", DATA_MODES)
def test_checks_in_the_client_pool(client, tmp_path, graph: str) -> None:
    """verify_in="client": window sums are fetched, assembled, checked and written by a process pool of the client."""
    for i in range(4):
        shutil.copy(MINI_WTNS, tmp_path / f"m{i}.wtns")
    shutil.copy(BAD / "unsatisfied.wtns", tmp_path / "bad.wtns")
    with graph_config(graph):
        report = distprove.batch(
            tmp_path, key=MINI_ZKEY, client=client, backend="cpu", verify_in="client", verify_processes=2, echo=None
        )
    assert ("prove-whole" in report.stage_seconds) == (graph in FUSED)
    assert "verify-write" not in report.stage_seconds
    assert sorted(r.name for r in report.proved) == [f"m{i}" for i in range(4)]
    assert [(r.name, "does not verify" in r.reason) for r in report.failed] == [("bad", True)]
    assert all(r.worker.startswith("client pid ") for r in report.results)
    out = tmp_path / "proofs"
    assert outputs(out) == {f"m{i}.{k}.json" for i in range(4) for k in ("proof", "public")}
    assert verify_many([(VK["mini"], out / f"m{i}.public.json", out / f"m{i}.proof.json") for i in range(4)]) == [True] * 4
    assert all({"msm", "assemble", "check", "write"} <= set(r.seconds) for r in report.proved)
    # the scheduler's tally (the distprove page): the pool's groups, by its processes
    page = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins["distprove-dashboard"].snapshot())
    assert (page["total"], page["done"], page["failed"], page["running"]) == (5, 4, 1, False)
    pooled = {w["worker"]: w["proofs"] for w in page["workers"] if w["worker"].startswith("client pid ")}
    assert sum(pooled.values()) == 4 and {"assemble", "check", "write"} <= set(page["stages"]), page
    # The pool stays for the next batch (no second start-up); the configuration picks the place.
    from distprove.cluster.batching import verification_pool

    pool = verification_pool(2)
    for p in out.glob("m0.*"):
        p.unlink()
    with dask.config.set({"distprove.verify-in": "client"}):
        again = distprove.batch(tmp_path, key=MINI_ZKEY, client=client, backend="cpu", verify_processes=2, echo=None)
    assert [r.name for r in again.proved] == ["m0"] and again.proved[0].worker.startswith("client pid ")
    assert verification_pool(2) is pool
    with pytest.raises(ValueError, match="verify_in"):
        distprove.batch(tmp_path, key=MINI_ZKEY, client=client, verify_in="moon", echo=None)


@pytest.mark.parametrize("source, line, guarded", [
    ('import x\nif __name__ == "__main__":\n    x.batch()\n', 3, True),
    ("if '__main__' == __name__ and True:\n    main()\n", 2, True),
    ('x.batch()\nif __name__ == "__main__":\n    pass\n', 1, False),
    ('if __name__ == "__main__":\n    pass\nelse:\n    x.batch()\n', 4, False),  # the else branch runs in the workers
    ('with open("f") as f:\n    x.batch()\n', 2, False),
    ('if __name__ != "__main__":\n    x.batch()\n', 2, False),
])
def test_main_guard_is_recognised(source: str, line: int, guarded: bool) -> None:
    import ast

    from distprove.cluster.client import _is_main_guard

    stmt = next(s for s in ast.parse(source).body if s.lineno <= line <= s.end_lineno)
    assert _is_main_guard(stmt, line) == guarded
