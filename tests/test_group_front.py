"""The group's front (prover.start_group): witnesses loaded as one stack, gathered and their H
scalars computed through the Backend group methods, with one wait per group. On the CPU backend:
the group calls equal the one-proof calls, a bad witness in the middle fails alone with its one
line, and the waits and calls per group are counted. tests/gpu/test_group_front_gpu.py does the
same on a device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import patched_wtns

from distprove.backends.base import LoadedWitness
from distprove.backends.cpu import CpuBackend
from distprove.bn254 import R
from distprove.errors import FormatError
from distprove.keystore import import_key
from distprove.prover import MsmPoints, Prefetched, h_scalars, load_and_gather, prefetch_witness, start_group

DATA = Path(__file__).parent / "data"
WITNESSES = sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return import_key(DATA / "mul_chain_1k" / "circuit_final.zkey", tmp_path_factory.mktemp("k") / "k.zarr")


class Deferred(CpuBackend):
    """A CPU backend that reads witness files as the GPU does for small ones: values unloaded and
    unchecked until the group's load (Backend.load_witness_group's host check)."""

    def read_witness_file(self, key: Any, path: Any) -> LoadedWitness:
        from distprove.formats.wtns import read_wtns

        return LoadedWitness(np.array(read_wtns(path, check_values=False).values), None)


class Counting(CpuBackend):
    """Counts the calls of the front and the waits."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in ("synchronize", "settle", "load_witness_group", "gather_group", "h_scalars_group",
                    "gather", "h_scalars", "load_witness_file", "read_witness_file", "msm_start_combined"):
            super().__getattribute__("_count")(name)
        return attr


def one_at_a_time(key: Any, witness: Path, be: CpuBackend) -> tuple[list[int], np.ndarray, dict]:
    """Public signals, H scalars and the MSM points of one proof through the one-proof calls."""
    g = load_and_gather(key, witness, be)
    hs = h_scalars(key, g, be)
    points = start_group(key, [witness], CpuBackend())()[0]
    assert isinstance(points, MsmPoints)
    return g.public, be.to_host(hs), points.points


@pytest.fixture(scope="module")
def reference(key: Any) -> dict[Path, tuple]:
    be = CpuBackend()
    return {w: one_at_a_time(key, w, be) for w in WITNESSES}


@pytest.mark.parametrize("size", [1, 2, 3])
def test_group_calls_equal_one_proof_calls(key: Any, size: int) -> None:
    """load_witness_group, gather_group and h_scalars_group give, row by row, what load_witness,
    gather and h_scalars give for each witness alone (deferred loads included)."""
    from distprove.formats.wtns import read_wtns

    be = Deferred()
    files = (WITNESSES * 2)[:size]
    loaded = [be.read_witness_file(key, f) for f in files]
    stack, verdicts = be.load_witness_group(key, loaded, [str(f) for f in files])
    assert verdicts() == [None] * size
    evals = be.gather_group(key, stack)
    for i, f in enumerate(files):
        values = read_wtns(f).values
        assert np.array_equal(be.to_host(stack[i]), values)
        alone = be.gather(key, be.load_witness(key, values))
        for m in range(3):
            assert evals[m][i] == alone[m]
    hs = be.h_scalars_group(key, evals)
    for i, f in enumerate(files):
        alone = be.h_scalars(key, be.gather(key, read_wtns(f).values))
        assert np.array_equal(be.to_host(hs[i]), be.to_host(alone))


@pytest.mark.parametrize("backend", [CpuBackend, Deferred])
@pytest.mark.parametrize("size,bad_at", [(1, None), (3, 1), (5, 2), (2, 0)])
def test_start_group_equals_one_at_a_time_and_a_bad_witness_fails_alone(
    key: Any, reference: dict, tmp_path: Path, backend: type, size: int, bad_at: int | None
) -> None:
    """Each proof of a group (files, prefetched files and arrays) gets the public signals and MSM
    points it gets alone; a witness with a value >= r in the middle is its own FormatError naming
    the file and the value, the others go on."""
    files: list[Any] = (WITNESSES * 2)[:size]
    bad = patched_wtns(tmp_path, WITNESSES[0], {7: R + 5})
    if bad_at is not None:
        files[bad_at] = bad
    be = backend()
    inputs: list[Any] = []
    for i, f in enumerate(files):
        if i % 3 == 1:
            inputs.append(prefetch_witness(key, f, be) if f != bad or backend is Deferred else f)
        elif i % 3 == 2 and f != bad:
            from distprove.formats.wtns import read_wtns

            inputs.append(np.array(read_wtns(f).values))
        else:
            inputs.append(f)
    out = start_group(key, inputs, be)()
    assert len(out) == size
    for i, (f, result) in enumerate(zip(files, out)):
        if f == bad:
            assert isinstance(result, FormatError)
            assert str(result) == f"{bad}: witness value 7 is >= r (not reduced)"
            continue
        assert isinstance(result, MsmPoints)
        public, _, points = reference[f]
        assert result.public == public
        assert result.points == points
        assert {"witness", "gather", "ntt", "msm"} <= set(result.timings)
        assert all(v >= 0 for v in result.timings.values())
    if backend is Deferred and bad_at is not None and bad_at % 3 == 1:
        assert isinstance(inputs[bad_at], Prefetched)  # the prefetch passed it: the group's load failed it


def test_a_failed_prefetch_and_an_array_of_the_wrong_size_fail_alone(key: Any, reference: dict) -> None:
    """An exception in a witness's place and an array of the wrong count are their proofs'
    results; the others are proved."""
    gone = FormatError("gone.wtns", "cannot read")
    out = start_group(key, [gone, WITNESSES[0], np.zeros((3, 8), np.uint32), WITNESSES[1]], CpuBackend())()
    assert out[0] is gone
    assert isinstance(out[2], FormatError) and "<witness>" in str(out[2])
    assert [o.points for o in (out[1], out[3])] == [reference[WITNESSES[0]][2], reference[WITNESSES[1]][2]]
    assert start_group(key, [gone], CpuBackend())() == [gone]


def test_one_wait_and_one_call_of_each_stage_per_group(key: Any) -> None:
    """A group of three: one load_witness_group, gather_group and h_scalars_group call, one settle
    (the group's wait) before its MSMs and no device-wide synchronize (a later group's work may be
    queued by then: the MSMs' own waiter is the wait); no per-proof wait."""
    be = Counting()
    out = start_group(key, WITNESSES, be)()
    assert all(isinstance(o, MsmPoints) for o in out)
    calls = be.calls
    assert calls["load_witness_group"] == calls["gather_group"] == calls["h_scalars_group"] == 1
    assert calls["settle"] == 1 and calls.get("synchronize", 0) == 0 and calls["msm_start_combined"] == 1
    assert calls["gather"] == calls["h_scalars"] == 3  # the CPU's defaults loop per proof
    assert calls["read_witness_file"] == 3


def test_deferred_prefetch_in_the_single_proof_path(key: Any, reference: dict, tmp_path: Path) -> None:
    """A prefetched witness left unloaded (the GPU's small witnesses) is loaded and checked by
    load_and_gather for a proof alone: the same evaluations, and a bad value raises there."""
    be = Deferred()
    g = load_and_gather(key, prefetch_witness(key, WITNESSES[0], be), be)
    assert g.public == reference[WITNESSES[0]][0]
    assert np.array_equal(be.to_host(h_scalars(key, g, be)), reference[WITNESSES[0]][1])
    assert g.timings["witness"] >= 0 and "gather" in g.timings
    bad = patched_wtns(tmp_path, WITNESSES[1], {3: (1 << 256) - 1})
    with pytest.raises(FormatError, match=r"witness value 3 is >= r"):
        load_and_gather(key, prefetch_witness(key, bad, be), be)


def test_prove_group_counts_a_bad_witness_found_by_the_group_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a worker's prove-group task, a witness whose bad value the group's load finds (read
    ahead unchecked, as a GPU reads small ones) fails alone and counts as one failed proof, once;
    one that fails its prefetch is counted there, not again."""
    import dask

    import distprove
    from distprove.cluster import metrics, work
    from distprove.cluster import state as dist_state
    from distprove.cluster.tasks import ProofSpec
    from test_worker_cache import counting_state

    st = counting_state()
    st.backend = Deferred()
    monkeypatch.setattr(dist_state, "state", lambda: st)
    counted: list[bool] = []
    monkeypatch.setattr(metrics, "record_proof", lambda key, ok: counted.append(ok))
    zkey = DATA / "mini" / "mini_0001.zkey"
    digest = distprove.open_key(zkey).content_hash
    bad = patched_wtns(tmp_path, DATA / "mini" / "witness.wtns", {2: R})

    def spec(name: str, witness: Path) -> ProofSpec:
        return ProofSpec(name, str(witness), str(zkey), digest, str(tmp_path / f"{name}.proof.json"),
                         str(tmp_path / f"{name}.public.json"))

    specs = [spec("a", DATA / "mini" / "witness.wtns"), spec("bad", bad), spec("short", DATA / "bad" / "truncated.wtns"),
             spec("b", DATA / "mini" / "witness.wtns")]
    with dask.config.set({"distprove.msm.group-proofs": 4}):
        results = work.prove_group(specs, work.plan_key(str(zkey)).widths)
    assert [type(r).__name__ for r in results] == ["Assembled", "Failed", "Failed", "Assembled"]
    assert results[1].reason == f"{bad}: witness value 2 is >= r (not reduced)"
    assert counted == [False, False]
