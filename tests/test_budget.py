"""Proofs under a memory budget on the CPU backend: the prover's memory plan
(:func:`distprove.prover.memory_plan`) streams the bases it does not keep resident chunk by chunk
and caps the groups, and the proofs verify with distprove's verifier and with snarkjs; without a
budget nothing changes (no plan, no chunk)."""

from __future__ import annotations

import dataclasses

from pathlib import Path
from typing import Any

import dask
import pytest

from conftest import snarkjs_verify
from distprove import prover
from distprove.backends.cpu import CpuBackend
from distprove.groth16 import MSM_NAMES
from distprove.keystore import import_key, open_key
from distprove.memplan import KeyDims, MemoryBudgetError, WorkerPlan
from distprove.verifier import verify

DATA = Path(__file__).parent / "data"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
MUL_WTNS = sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))
VK = DATA / "mul_chain_1k" / "verification_key.json"


class Counting(CpuBackend):
    """A CPU backend that records which MSMs ran whole and which chunk by chunk (and how)."""

    def __init__(self) -> None:
        super().__init__()
        self.whole: list[str] = []
        self.chunks: list[tuple[str, int, int, bool]] = []

    def msm_windows(self, key: Any, which: str, *args: Any, **kwargs: Any) -> Any:
        self.whole.append(which)
        return super().msm_windows(key, which, *args, **kwargs)

    def msm_chunk_bases(self, key: Any, which: str, lo: int, hi: int, slot: int, streamed: bool) -> Any:
        self.chunks.append((which, lo, hi, streamed))
        return super().msm_chunk_bases(key, which, lo, hi, slot, streamed)


def check(proof: prover.Proof, out: Path, snarkjs: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    proof.write(out / "proof.json", out / "public.json")
    assert verify(VK, out / "public.json", out / "proof.json")
    assert snarkjs_verify(VK, out / "public.json", out / "proof.json", snarkjs)


def test_no_budget_no_plan_and_every_msm_whole() -> None:
    be = Counting()
    key = open_key(MUL_ZKEY)
    with dask.config.set({"distprove.planner.worker-memory": None}):
        assert prover.memory_plan(be, key) is None
        prover.prove(key, MUL_WTNS[0], be)
    assert sorted(be.whole) == sorted(MSM_NAMES) and be.chunks == []


def test_a_tiny_budget_streams_every_base_array_and_the_proof_verifies(tmp_path: Path, snarkjs: str) -> None:
    be = Counting()
    key = open_key(MUL_ZKEY)
    with dask.config.set({"distprove.planner.worker-memory": 900_000}):
        plan = prover.memory_plan(be, key)
        assert plan is not None and plan.streamed == tuple(MSM_NAMES) and plan.chunk == 64
        assert plan.total <= 900_000 and plan.max_group == 1
        proof = prover.prove(key, MUL_WTNS[0], be)
    check(proof, tmp_path, snarkjs)
    assert be.whole == []
    assert {which for which, *_ in be.chunks} == set(MSM_NAMES)
    assert all(streamed and hi - lo <= 64 for _, lo, hi, streamed in be.chunks)


def test_a_budget_streaming_some_arrays_from_a_key_store(tmp_path: Path, snarkjs: str) -> None:
    """B2, C and H streamed from the zarr store range by range; A and B1 resident, run over
    chunks of their resident bases (the plan's chunk is shorter than they are)."""
    store = open_key(import_key(MUL_ZKEY, tmp_path / "mul.zarr").path)
    be = Counting()
    with dask.config.set({"distprove.planner.worker-memory": 1_100_000}):
        plan = prover.memory_plan(be, store)
        assert plan is not None and plan.streamed == ("B2", "C", "H")
        proofs = list(prover.prove_many(store, MUL_WTNS[:2], be))
    for i, proof in enumerate(proofs):
        check(proof, tmp_path / f"p{i}", snarkjs)
    assert {(which, streamed) for which, _, _, streamed in be.chunks} == \
           {("B2", True), ("C", True), ("H", True), ("A", False), ("B1", False)}
    assert be.whole == [] and all(hi - lo <= plan.chunk for _, lo, hi, _ in be.chunks)


def test_a_budget_below_the_smallest_plan_fails_naming_it() -> None:
    key = open_key(MUL_ZKEY)
    with dask.config.set({"distprove.planner.worker-memory": 100_000}):
        with pytest.raises(MemoryBudgetError, match="smallest plan"):
            prover.memory_plan(CpuBackend(), key)


def test_groups_with_streamed_and_chunked_resident_msms(tmp_path: Path, snarkjs: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan (made by hand) with groups of 3: B2 and H streamed, A, B1, C resident and run in
    chunks of 300 points; 4 proofs in groups of 3 and 1, each verified."""
    key = open_key(MUL_ZKEY)
    dims = KeyDims.of(key)
    plan = WorkerPlan(1 << 30, ("A", "B1", "C"), ("B2", "H"), 300, 3, 2, dims.lengths(), {})
    monkeypatch.setattr(prover, "memory_plan", lambda be, k: plan)
    be = Counting()
    proofs = list(prover.prove_many(key, (MUL_WTNS * 2)[:4], be, group=8))
    assert len(proofs) == 4
    for i, proof in enumerate(proofs):
        check(proof, tmp_path / f"g{i}", snarkjs)
    assert be.whole == []
    assert {(which, streamed) for which, _, _, streamed in be.chunks} == \
           {("B2", True), ("H", True), ("A", False), ("B1", False), ("C", False)}
    # two groups, each one pass over every MSM's chunks
    assert sum(1 for which, lo, *_ in be.chunks if which == "B2" and lo == 0) == 2


def test_a_workers_resident_key_streams_from_storage_without_keeping_the_arrays(tmp_path: Path) -> None:
    """A CPU worker keeps a key's arrays in host memory once read; a streamed MSM's chunks are
    read from the store instead, so the streamed arrays are never held whole."""
    from distprove.cluster.state import ResidentKey

    store = open_key(import_key(MUL_ZKEY, tmp_path / "mul.zarr").path)
    resident = ResidentKey(store, keep_host=True)
    be = Counting()
    with dask.config.set({"distprove.planner.worker-memory": 1_100_000}):
        plan = prover.memory_plan(be, resident)
        assert plan is not None and plan.streamed == ("B2", "C", "H")
        ws = prover.start_window_sums(resident, MUL_WTNS[0], be)()  # a worker's task body's path
    proof = prover.assemble(resident.points, ws.sums, ws.widths, ws.public)
    assert verify(VK, *_written(proof, tmp_path))
    assert not any(attr in resident.__dict__ for attr in ("b2", "c", "h"))
    assert "a" in resident.__dict__  # resident arrays are kept as before


def _written(proof: prover.Proof, out: Path) -> tuple[Path, Path]:
    proof.write(out / "proof.json", out / "public.json")
    return out / "public.json", out / "proof.json"


def test_info_shows_the_memory_plan_for_a_budget() -> None:
    from click.testing import CliRunner

    from distprove.cli import main

    res = CliRunner().invoke(main, ["info", str(MUL_ZKEY), "--memory-limit", "300MiB", "--group", "4"])
    assert res.exit_code == 0, res.output
    assert "memory plan for a budget of 0.29 GiB" in res.output and "max proofs per group: 4" in res.output
    assert "streamed bases: none" in res.output
    res = CliRunner().invoke(main, ["info", str(MUL_ZKEY), "--memory-limit", "100MiB"])
    assert res.exit_code == 0 and "does not hold this key" in res.output and "smallest plan" in res.output
    res = CliRunner().invoke(main, ["info", "--memory-limit", "1GiB"])
    assert res.exit_code != 0 and "give one" in res.output


def test_the_batch_report_names_each_keys_plan_under_a_configured_budget() -> None:
    from distprove.cluster.batching import BatchReport, memory_lines
    from distprove.cluster.tasks import KeyInfo

    key = open_key(MUL_ZKEY)
    info = KeyInfo(str(MUL_ZKEY), key.content_hash, key.n_vars, key.n_public, key.domain_size, {}, "cpu", False,
                   nbytes=0)
    assert memory_lines([info], None, None) == []
    lines = memory_lines([info, info], None, 900_000)
    assert len(lines) == 1 and "streams A, B1, B2, C, H, chunks of 64 points" in lines[0]
    report = BatchReport([], 1.0, "data", 1, memory=lines)
    assert lines[0] in report.summary() and report.to_json()["memory"] == lines
    with dask.config.set({"distprove.gpu.memory-limit": None}):
        assert memory_lines([dataclasses.replace(info, backend="gpu")], 1 << 30, None) == []
    with dask.config.set({"distprove.gpu.memory-limit": "1 GiB"}):
        gpu_lines = memory_lines([dataclasses.replace(info, backend="gpu")], 1 << 30, None)
        assert len(gpu_lines) == 1 and "every base resident" in gpu_lines[0]
