"""The group's front on a device: GpuBackend.load_witness_group (one upload, one range check),
gather_group (one launch) and h_scalars_group (the NTTs of a stack) equal, bit for bit, the
one-proof calls and the CPU backend; prover.start_group's proofs equal the CPU's, a bad witness in
the middle of a group failing alone with its one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import patched_wtns

from distprove.backends.cpu import CpuBackend
from distprove.bn254 import R
from distprove.errors import FormatError
from distprove.formats.wtns import read_wtns
from distprove.keystore import import_key
from distprove.prover import MsmPoints, Prefetched, prefetch_witness, start_group

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data"
FIXTURES = ["mul_chain_1k", "poseidon_k4", "bits_k16"]


def _witnesses(name: str) -> list[Path]:
    d = DATA / name
    return sorted((d / "witnesses").glob("*.wtns")) or [d / "witness.wtns"]


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def gpu(cp):
    from distprove.backends.gpu import GpuBackend

    return GpuBackend()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("keys")
    return {name: import_key(DATA / name / "circuit_final.zkey", root / f"{name}.zarr") for name in FIXTURES}


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("size", [1, 3, 5])
def test_group_calls_equal_one_proof_calls(gpu, keys: dict, name: str, size: int) -> None:
    key, cpu = keys[name], CpuBackend()
    files = (_witnesses(name) * 5)[:size]
    loaded = [gpu.read_witness_file(key, f) for f in files]
    assert all(lw.vector is None for lw in loaded)  # small witnesses wait for their group's upload
    stack, verdicts = gpu.load_witness_group(key, loaded, [str(f) for f in files])
    evals = gpu.gather_group(key, stack)
    host_evals = [gpu.to_host(v) for v in evals]  # (G, domain, 8): before h_scalars_group overwrites them
    hs = gpu.h_scalars_group(key, evals)
    assert verdicts() == [None] * size
    for i, f in enumerate(files):
        values = read_wtns(f).values
        assert np.array_equal(gpu.to_host(stack[i]), values)
        alone = gpu.gather(key, gpu.load_witness(key, values))
        for m in range(3):
            assert np.array_equal(host_evals[m][i], gpu.to_host(alone[m]))
        h_alone = gpu.to_host(gpu.h_scalars(key, alone))
        assert np.array_equal(gpu.to_host(hs[i]), h_alone)
        assert np.array_equal(h_alone, cpu.to_host(cpu.h_scalars(key, cpu.gather(key, values))))


@pytest.fixture(scope="module")
def reference(keys: dict) -> dict[Path, MsmPoints]:
    """Each mul_chain_1k witness's public signals and MSM points on the CPU backend."""
    key = keys["mul_chain_1k"]
    return {f: start_group(key, [f], CpuBackend())()[0] for f in _witnesses("mul_chain_1k")}


@pytest.mark.parametrize("size,bad_at", [(1, None), (3, 1), (5, 2), (4, None)])
def test_start_group_equals_cpu_and_a_bad_witness_fails_alone(
    gpu, keys: dict, reference: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, bad_at: int | None
) -> None:
    """A group of files, prefetched small witnesses (unloaded) and a prefetched large one (loaded
    ahead: DEFER_WITNESS_BYTES lowered for it) gives the CPU's points; a witness with a value >= r
    fails alone with the host read's message."""
    from distprove.backends.gpu import backend as gpu_backend

    key = keys["mul_chain_1k"]
    files: list[Any] = (_witnesses("mul_chain_1k") * 2)[:size]
    bad = patched_wtns(tmp_path, files[0], {5: R})
    if bad_at is not None:
        files[bad_at] = bad
    inputs: list[Any] = [prefetch_witness(key, f, gpu) if i % 2 else f for i, f in enumerate(files)]
    if size == 4:
        monkeypatch.setattr(gpu_backend, "DEFER_WITNESS_BYTES", 0)
        inputs[2] = prefetch_witness(key, files[2], gpu)
        assert isinstance(inputs[2], Prefetched) and inputs[2].loaded.vector is not None
    out = start_group(key, inputs, gpu)()
    for f, result in zip(files, out):
        if f == bad:
            assert isinstance(result, FormatError)
            assert str(result) == f"{bad}: witness value 5 is >= r (not reduced)"
            continue
        assert isinstance(result, MsmPoints)
        assert result.public == reference[f].public and result.points == reference[f].points
        assert {"witness", "gather", "ntt", "msm"} <= set(result.timings)


@pytest.mark.parametrize("name", FIXTURES)
def test_group_live_shares_on_the_device_equal_the_host(gpu, cp, keys: dict, name: str) -> None:
    """The live shares a GPU computes from a group's device stack equal the host's
    :func:`live_fraction` of each witness (they pick the MSMs' window widths), for the fixtures'
    witnesses and for one of random values, zeros and ones at an odd size past the sample count."""
    from distprove.stages.msm import live_fraction

    key = keys[name]
    loaded = [gpu.read_witness_file(key, w) for w in _witnesses(name)]
    stack, verdicts = gpu.load_witness_group(key, loaded, [str(w) for w in _witnesses(name)])
    shares = gpu.live_fractions_group(stack, loaded)
    gpu.settle()
    assert verdicts() == [None] * len(loaded)
    assert shares() == [live_fraction(lw.values) for lw in loaded]
    rng = np.random.default_rng(3)
    host = rng.integers(0, 1 << 32, size=(3, 9001, 8), dtype=np.uint64).astype(np.uint32)
    host[:, ::3, 1:] = 0
    host[:, ::3, 0] = rng.integers(0, 2, size=host[:, ::3, 0].shape)
    got = gpu.live_fractions_group(cp.asarray(host), [])()
    assert got == [live_fraction(host[g]) for g in range(3)]
