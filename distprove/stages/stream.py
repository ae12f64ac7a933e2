"""An MSM computed chunk by chunk over its bases: each chunk an ordinary MSM over the chunk's
bases and the matching slice of scalars, the chunks' window sums added window by window.

Window sums are linear in the points: the sums over [0, n) are the sums over the chunks added
(each chunk's window 0 carries its own scalar-1 sum), so the chunked MSM's :func:`combine` is the
whole MSM's point. The loop is the backends' common part; each backend supplies the two steps
(:meth:`distprove.backends.base.Backend.msm_chunk_bases` and
:meth:`~distprove.backends.base.Backend.msm_chunk_start`): the CPU reads a chunk's rows and
computes its MSM now; the GPU copies a streamed chunk from pinned host memory to one of two device
buffers on a copy stream (a resident array's chunk is a slice of it) and queues its MSM, so the
next chunk's read and copy overlap this chunk's MSM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from distprove.bn254 import Affine, Group
from distprove.groth16 import msm_group
from distprove.stages.msm import add_partials

SLOTS = 2
"""Chunk buffers a streamed MSM cycles through: chunk i takes slot i % 2 (double buffering)."""


def chunk_ranges(n: int, chunk: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges of ``chunk`` points covering 0 .. n in order (the last may be shorter);
    none for n = 0."""
    if chunk < 1 or n < 0:
        raise ValueError(f"need chunk >= 1 and n >= 0 (got chunk={chunk}, n={n})")
    return [(lo, min(n, lo + chunk)) for lo in range(0, n, chunk)]


def chunk_scalars(which: str, scalars: Any, lo: int, hi: int, n_public: int) -> Any:
    """The scalars of MSM ``which``'s bases [lo, hi): the witness rows for A, B1, B2, the rows
    after the public signals for C (its base i is signal n_public + 1 + i), the H scalars' rows
    for H. Sliced only (host or device arrays alike)."""
    if which == "C":
        return scalars[n_public + 1 + lo : n_public + 1 + hi]
    return scalars[lo:hi]


def add_window_sums(group: Group, parts: Sequence[Sequence[Affine]]) -> list[Affine]:
    """The window sums of the union of point ranges from each range's window sums (all over the
    same windows): window by window, :func:`~distprove.stages.msm.add_partials`."""
    return [add_partials(group, list(column)) for column in zip(*parts)]


def chunked_msm_start(
    be: Any,
    key: Any,
    which: str,
    scalars: Sequence[Any],
    c: int,
    lo: int,
    hi: int,
    chunk: int,
    *,
    streamed: bool,
    constant_work: bool | None = None,
) -> Callable[[], list[list[Affine]]]:
    """Start MSM ``which`` of key ``key`` for several proofs (``scalars[p]``: proof p's scalars as
    :meth:`Backend.msm_windows` takes them: the witness for A, B1, B2, C, the H scalars for H),
    windows [lo, hi) of width ``c``, chunk by chunk of ``chunk`` points, and return the waiter of
    each proof's window sums. ``streamed``: the bases are read from the key's host array chunk by
    chunk (else they are the backend's resident ones, sliced).

    Chunk i's bases go to slot i % :data:`SLOTS` (:meth:`Backend.msm_chunk_bases`), its MSM is
    started (:meth:`Backend.msm_chunk_start`) and then chunk i + 1's bases are fetched, beside
    chunk i's MSM on a device that queues it; the waiter adds the chunks' sums."""
    group = msm_group(which)
    n = be.msm_length(key, which)
    waits: list[Callable[[], list[list[Affine]]]] = []
    ranges = chunk_ranges(n, chunk)
    if ranges:
        bases = be.msm_chunk_bases(key, which, *ranges[0], 0, streamed)
        for i, (a, b) in enumerate(ranges):
            parts = [chunk_scalars(which, s, a, b, key.n_public) for s in scalars]
            waits.append(be.msm_chunk_start(which, bases, parts, c, lo, hi, i % SLOTS, constant_work=constant_work))
            if i + 1 < len(ranges):
                bases = be.msm_chunk_bases(key, which, *ranges[i + 1], (i + 1) % SLOTS, streamed)
        del bases

    def wait() -> list[list[Affine]]:
        if not waits:
            return [[None] * (hi - lo) for _ in scalars]
        sums = [w() for w in waits]  # per chunk, per proof
        return [add_window_sums(group, [chunk_sums[p] for chunk_sums in sums]) for p in range(len(scalars))]

    return wait
