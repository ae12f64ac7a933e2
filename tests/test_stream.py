"""A chunked (streamed) MSM on the CPU backend: the stage-level chunk loop equals the resident
MSM for random scalars (0, 1 and repeats among them), infinity bases, odd sizes and chunk sizes
that do not divide the number of points, its bases read from the key's host arrays (a zarr store
range by range) or sliced from the backend's resident ones."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.base import Backend
from distprove.backends.cpu import CpuBackend
from distprove.groth16 import msm_group
from distprove.keyrange import RangedArray
from distprove.keystore import import_key, open_key
from distprove.stages.msm import combine, num_windows
from distprove.stages.stream import SLOTS, add_window_sums, chunk_ranges, chunk_scalars, chunked_msm_start

DATA = Path(__file__).parent / "data"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"


def random_scalars(n: int, rng: random.Random) -> np.ndarray:
    """(n, 8) scalars < r: random, with zeros, ones and repeated values among them."""
    values = [rng.randrange(bn254.R) for _ in range(n)]
    for i in range(0, n, 5):
        values[i] = 0
    for i in range(1, n, 7):
        values[i] = 1
    for i in range(3, n, 11):
        values[i] = values[i - 1]
    return bn254.limbs_from_ints(values)


@pytest.fixture(scope="module")
def key() -> Any:
    """A small key: the mul-chain key's first 45 witness rows, their C rows and 53 H rows (odd
    sizes), with some bases made infinity (all-zero rows)."""
    k = open_key(MUL_ZKEY)
    arrays = {"a": np.array(k.a[:45]), "b1": np.array(k.b1[:45]), "b2": np.array(k.b2[:45]),
              "c": np.array(k.c[:45 - k.n_public - 1]), "h": np.array(k.h[:53])}
    for arr in arrays.values():
        arr[[2, 9, 10]] = 0
    return SimpleNamespace(n_vars=45, n_public=k.n_public, domain_size=53, content_hash="stream-test", **arrays)


def resident_sums(be: Backend, key: Any, which: str, scalars: np.ndarray, c: int, lo: int, hi: int) -> list:
    return be.msm_windows(key, which, scalars, c, lo, hi)


def test_chunk_ranges_cover_the_points_in_order() -> None:
    assert chunk_ranges(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_ranges(8, 4) == [(0, 4), (4, 8)]
    assert chunk_ranges(3, 10) == [(0, 3)]
    assert chunk_ranges(0, 4) == []
    with pytest.raises(ValueError):
        chunk_ranges(5, 0)


def test_chunk_scalars_offsets_c_past_the_public_signals() -> None:
    w = np.arange(20)
    assert list(chunk_scalars("A", w, 2, 5, 3)) == [2, 3, 4]
    assert list(chunk_scalars("C", w, 2, 5, 3)) == [6, 7, 8]
    assert list(chunk_scalars("H", w, 0, 2, 3)) == [0, 1]


def test_add_window_sums_adds_window_by_window() -> None:
    g = bn254.G1.generator
    two = bn254.add(bn254.G1, g, g)
    assert add_window_sums(bn254.G1, [[g, None], [g, g]]) == [two, g]
    assert add_window_sums(bn254.G1, [[None, None]]) == [None, None]


@pytest.mark.parametrize("which", ["A", "B2", "C", "H"])
@pytest.mark.parametrize("streamed", [True, False])
def test_chunked_msm_equals_the_resident_one(key: Any, which: str, streamed: bool) -> None:
    be = CpuBackend()
    rng = random.Random(f"{which}{streamed}")
    n_scalars = key.domain_size if which == "H" else key.n_vars
    proofs = [random_scalars(n_scalars, rng) for _ in range(2)]
    c = 4
    want = [resident_sums(be, key, which, s, c, 0, num_windows(c)) for s in proofs]
    for chunk in (1, 3, 7, 16, 1000):
        got = chunked_msm_start(be, key, which, proofs, c, 0, num_windows(c), chunk, streamed=streamed)()
        assert got == want, (which, chunk)
        assert [combine(msm_group(which), dict(enumerate(sums)), c) for sums in got] == \
               [combine(msm_group(which), dict(enumerate(sums)), c) for sums in want]


def test_chunked_msm_of_a_window_range(key: Any) -> None:
    be = CpuBackend()
    s = random_scalars(key.n_vars, random.Random(3))
    c = 5
    want = resident_sums(be, key, "B1", s, c, 2, 6)
    assert chunked_msm_start(be, key, "B1", [s], c, 2, 6, 8, streamed=True)() == [want]


def test_no_points_give_infinity(key: Any) -> None:
    be = CpuBackend()
    empty = SimpleNamespace(**{**vars(key), "a": key.a[:0]})
    s = random_scalars(0, random.Random(1))
    assert chunked_msm_start(be, empty, "A", [s, s], 4, 0, 3, 5, streamed=True)() == [[None] * 3] * 2


class Recording(CpuBackend):
    """A CPU backend that records the chunk ranges read and the slots used."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[int, int, int, bool]] = []
        self.starts: list[int] = []

    def msm_chunk_bases(self, key: Any, which: str, lo: int, hi: int, slot: int, streamed: bool) -> Any:
        self.reads.append((lo, hi, slot, streamed))
        return super().msm_chunk_bases(key, which, lo, hi, slot, streamed)

    def msm_chunk_start(self, which: str, bases: Any, scalars: Any, c: int, lo: int, hi: int, slot: int,
                        *, constant_work: bool | None = None) -> Any:
        self.starts.append(slot)
        return super().msm_chunk_start(which, bases, scalars, c, lo, hi, slot, constant_work=constant_work)


def test_chunks_alternate_slots_and_the_next_is_read_after_this_ones_start(key: Any) -> None:
    be = Recording()
    s = random_scalars(key.n_vars, random.Random(5))
    chunked_msm_start(be, key, "A", [s], 4, 0, num_windows(4), 10, streamed=True)()
    assert be.reads == [(0, 10, 0, True), (10, 20, 1, True), (20, 30, 0, True), (30, 40, 1, True), (40, 45, 0, True)]
    assert be.starts == [i % SLOTS for i in range(5)]


def test_streamed_chunks_read_only_their_zarr_range(tmp_path: Path) -> None:
    """From a key store, a chunk's rows come through a ranged read of the zarr array: the MSM over
    a store's chunks equals the one over its whole array."""
    store = open_key(import_key(MUL_ZKEY, tmp_path / "mul.zarr").path)
    be = CpuBackend()
    s = random_scalars(store.n_vars, random.Random(9))[:300]
    view = SimpleNamespace(n_vars=300, n_public=store.n_public, domain_size=store.domain_size,
                           content_hash="zarr-range", a=RangedArray(store.a, 0, 300))
    want = be.msm_windows(view, "A", s, 6, 0, num_windows(6))
    got = chunked_msm_start(be, view, "A", [s], 6, 0, num_windows(6), 128, streamed=True)()
    assert got == [want]
