"""A worker's device memory plan for one key under a budget: what stays resident, what is
streamed, in what chunks, and how many proofs a group may hold.

The plan (:func:`plan_memory`) is pure arithmetic over the key's shape (:class:`KeyDims`), the
budget in bytes and the group size wanted. It adds up, for a group of G proofs:

* the resident key arrays: the coefficient CSRs (the gather reads them whole, so they are
  always resident), IC, and each MSM's base array that is not streamed;
* the proofs' vectors: the witness and the H scalars of every group in flight
  (``distprove.msm.groups-in-flight`` groups are queued at once), and the NTT's working set of
  one group (the gathered a, b, c, the copies the H transform works on and one pass scratch:
  :func:`ntt_bytes`);
* the MSM scratch: the G2 lane (B2) and the G1 lane (the largest of A, B1, C, H) run at once,
  each with its own buffers, as :func:`msm_scratch_bytes` computes them from the GPU MSM's
  allocations (:func:`distprove.backends.gpu.msm.group_bytes`); a streamed MSM's buffers are
  those of one chunk;
* two device chunk buffers (double buffering) of the streamed arrays' widest rows;
* ``overhead``: what the plan does not itemise (NTT tables, constants, the pool's rounding).

The plan keeps every MSM whole and resident when that fits. Otherwise MSMs run in chunks of
points (a chunk's MSM scratch instead of the whole MSM's): a resident MSM longer than a chunk
over slices of its resident bases, a streamed one over chunks copied from host memory. Base
arrays are streamed in :data:`STREAM_ORDER` (B2 first: its points cost the most arithmetic per
byte copied, so its copies hide best behind its MSM), as few as fit with chunks of at least
:data:`EFFICIENT_CHUNK` points (the largest power of two that fits with one proof), one group in
flight before more streaming; then down to :data:`MIN_CHUNK`. The group is the largest (up to the
one wanted) that fits. A budget below the smallest plan (everything streamed, the smallest chunk,
one proof, one group in flight) raises :class:`MemoryBudgetError` naming both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distprove.backends.base import GPU_OVERHEAD
from distprove.errors import DistproveError
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.keyrange import G1_BYTES, G2_BYTES, SCALAR_BYTES, msm_lengths

STREAM_ORDER = ("B2", "H", "C", "B1", "A")
"""The order in which MSMs' base arrays leave the device when the key does not fit."""
MIN_CHUNK = 1 << 12
"""Fewest points of a chunk: below it a chunk's MSM is all launch and reduction."""
EFFICIENT_CHUNK = 1 << 18
"""Fewest points of a chunk before another base array is streamed instead: from here down a
chunk's fixed costs (launches, the reduction) start to show against its points' work."""
MAX_CHUNK = 1 << 22
"""Most points of a streamed chunk: 256 MiB of G1 or 512 MiB of G2 rows, two of them on the
device, and an MSM long enough to hide the next chunk's copy."""

MsmScratch = Callable[[str, int, int], int]
"""bytes(which, points, proofs): the device scratch of one (grouped) MSM."""


class MemoryBudgetError(DistproveError):
    """The memory budget does not hold even the smallest plan of a key."""


@dataclass(frozen=True)
class KeyDims:
    """What the plan needs of a key: its sizes and its CSR bytes."""

    n_vars: int
    n_public: int
    domain_size: int
    csr_bytes: int = 0
    """Bytes of the two coefficient CSRs (row_ptr, signal, value of A and B)."""
    msm_points: tuple[tuple[str, int], ...] | None = None
    """(MSM, points) of a key whose base arrays are not the whole key's (a points-mode share,
    :class:`~distprove.keyrange.KeyShareView`); None: the whole key's."""

    @classmethod
    def of(cls, key: Any) -> "KeyDims":
        """A key's dims: its header values, its CSR arrays' bytes as stored (a key store's array
        metadata; a .zkey's coefficient count: 4 + 32 bytes a term and the row pointers) and, for a
        share of a key, its ranges' lengths; reading no array."""
        from distprove.keyrange import KeyShareView

        points = tuple((which, hi - lo) for which, lo, hi in key.share.ranges) if isinstance(key, KeyShareView) else None
        return cls(int(key.n_vars), int(key.n_public), int(key.domain_size), csr_bytes_of(key), points)

    def lengths(self) -> dict[str, int]:
        """Points of each MSM's bases (:func:`distprove.keyrange.msm_lengths`, or the share's)."""
        if self.msm_points is not None:
            return dict(self.msm_points)
        return msm_lengths(self.n_vars, self.n_public, self.domain_size)

    def array_bytes(self, which: str) -> int:
        """Bytes of MSM ``which``'s base array."""
        return self.lengths()[which] * row_bytes(which)


def row_bytes(which: str) -> int:
    """Bytes of one base of MSM ``which``: a G2 point for B2, a G1 point otherwise."""
    return G2_BYTES if which == "B2" else G1_BYTES


def csr_bytes_of(key: Any) -> int:
    """Bytes of a key's coefficient CSRs without reading them: the arrays' ``nbytes`` where the
    key has them unbuilt (a zarr store's metadata), else from the coefficient count ``n_coefs``
    (a .zkey's header: a term is a 4-byte signal and a 32-byte value, plus 4-byte row pointers
    of both matrices). 0 when neither is known."""
    if callable(getattr(type(key), "csr_nbytes", None)):  # a key store (keystore.KeyStore)
        return int(key.csr_nbytes())
    inner = getattr(key, "_key", None)  # a worker's resident key or a share: the key they wrap
    if inner is not None:
        return csr_bytes_of(inner)
    n_coefs = getattr(key, "n_coefs", None)
    if n_coefs is None:
        zkey = getattr(key, "zkey", None)
        n_coefs = getattr(zkey, "n_coefs", None)
    if n_coefs is None:
        return 0
    return int(n_coefs) * (4 + SCALAR_BYTES) + 2 * 4 * (int(key.domain_size) + 1)


def gpu_msm_scratch(which: str, points: int, proofs: int) -> int:
    """The GPU MSM's device buffers for ``proofs`` scalar vectors over ``points`` bases of MSM
    ``which`` at the GPU's window width (dense scalars: the widest): gpu.msm.group_bytes, the sum
    of what _launch takes from the scratch (msm.py: _sort_phase's counts, cursor and 2 * nw * n
    entries, _sort's radix temporaries, _pair_rounds' entries, jobs and sums, _accumulate_phase's
    rows * pw buckets and spill arrays, _reduce_phase's segment sums) plus the stacked scalars
    (32 bytes a scalar) and ``out``."""
    from distprove.backends.gpu import msm as gpu_msm
    from distprove.stages.msm import num_windows

    group = msm_group(which)
    if points <= 0 or proofs <= 0:
        return 0
    c = gpu_msm.pick_window(points, group)
    w = num_windows(c)
    out = (proofs * w + proofs) * 4 * gpu_msm._xyzz_words(group)  # _launch's per-call out buffer
    return gpu_msm.group_bytes(group, points, c, 0, w, proofs) + out


def ntt_bytes(domain_size: int, proofs: int) -> int:
    """The H stage's device vectors for a group of ``proofs``: the gathered a, b, c, transformed in
    place (the GPU's h_scalars and h_scalars_group), and one pass scratch of a multi-pass
    transform (ntt.py h_scalars: ``empty_like(a)``): 4 vectors of the domain a proof."""
    return 4 * SCALAR_BYTES * domain_size * proofs


@dataclass(frozen=True)
class WorkerPlan:
    """One key's device memory plan under ``budget`` (:func:`plan_memory`)."""

    budget: int
    resident: tuple[str, ...]
    """MSMs whose base arrays stay on the device, in :data:`MSM_NAMES` order."""
    streamed: tuple[str, ...]
    """MSMs whose bases are streamed from host memory chunk by chunk, in :data:`MSM_NAMES` order."""
    chunk: int
    """Points of a chunk: a streamed MSM's, and a resident MSM's longer than it, which then runs
    chunk by chunk over its resident bases (its scratch is one chunk's). 0: no MSM in chunks."""
    max_group: int
    """Most proofs a group may hold."""
    in_flight: int
    """Most groups queued on the device at once."""
    lengths: Mapping[str, int] = field(default_factory=dict)
    """Points of each MSM's bases."""
    parts: Mapping[str, int] = field(default_factory=dict)
    """The plan's bytes by item at ``max_group`` proofs: arrays, vectors, ntt, msm, chunks, overhead."""

    @property
    def total(self) -> int:
        """Device bytes the plan uses at its group size."""
        return sum(self.parts.values())

    def streams(self, which: str) -> bool:
        """Whether MSM ``which`` takes its bases from host memory chunk by chunk."""
        return which in self.streamed

    def chunked(self, which: str) -> bool:
        """Whether MSM ``which`` runs chunk by chunk (streamed, or resident and longer than a chunk)."""
        return self.chunk > 0 and (which in self.streamed or self.lengths.get(which, 0) > self.chunk)

    def brief(self) -> str:
        """One line: what is streamed, the chunk, the group."""
        streamed = f"streams {', '.join(self.streamed)}" if self.streamed else "every base resident"
        chunk = f", chunks of {self.chunk} points" if self.chunk else ""
        return (f"{streamed}{chunk}, up to {self.max_group} proofs a group, {self.total / 2**30:.2f} of "
                f"{self.budget / 2**30:.2f} GiB planned")

    def describe(self) -> str:
        """Lines for ``distprove info`` and the batch report."""
        gib = 2**30
        chunked = [which for which in self.resident if self.chunked(which)]
        lines = [f"memory plan for a budget of {self.budget / gib:.2f} GiB: {self.total / gib:.2f} GiB planned",
                 f"  resident bases: {', '.join(self.resident) or 'none'} (and the coefficient CSRs)",
                 f"  streamed bases: {', '.join(self.streamed) or 'none'}"
                 + (" (two chunk buffers)" if self.streamed else ""),
                 f"  chunk: {self.chunk} points" if self.chunk else "  chunk: none (every MSM whole)",
                 f"  resident MSMs run in chunks: {', '.join(chunked) or 'none'}",
                 f"  max proofs per group: {self.max_group}; groups in flight: {self.in_flight}",
                 "  " + ", ".join(f"{k} {v / gib:.2f} GiB" for k, v in self.parts.items())]
        return "\n".join(lines)


def _parts(dims: KeyDims, streamed: tuple[str, ...], chunk: int, proofs: int, in_flight: int,
           overhead: int, scratch: MsmScratch) -> dict[str, int]:
    """The plan's bytes by item (see the module docstring); ``chunk`` 0: no MSM in chunks."""
    lengths = dims.lengths()
    arrays = dims.csr_bytes + (dims.n_public + 1) * G1_BYTES
    arrays += sum(dims.array_bytes(which) for which in MSM_NAMES if which not in streamed)
    vectors = in_flight * proofs * SCALAR_BYTES * (dims.n_vars + dims.domain_size)

    def msm(which: str) -> int:
        return scratch(which, min(chunk, lengths[which]) if chunk else lengths[which], proofs)

    g1 = max((msm(which) for which in MSM_NAMES if which != "B2"), default=0)
    chunks = 2 * chunk * max((row_bytes(which) for which in streamed), default=0)
    return {"arrays": arrays, "vectors": vectors, "ntt": ntt_bytes(dims.domain_size, proofs),
            "msm": msm("B2") + g1, "chunks": chunks, "overhead": overhead}


def _chunk_candidates(floor: int, longest: int) -> list[int]:
    """Chunk sizes to try, largest first: powers of two from :data:`MAX_CHUNK` down to ``floor``,
    none above ``longest`` (the longest MSM: a larger chunk is that MSM whole)."""
    out: list[int] = []
    size = MAX_CHUNK
    while size >= floor:
        if min(size, longest) not in out:
            out.append(min(size, longest))
        size //= 2
    return out


def _tries(lengths: Mapping[str, int], in_flight: int, min_chunk: int) -> Any:
    """(streamed, chunk, groups in flight) in the order :func:`plan_memory` tries them."""
    yield (), 0, in_flight
    longest = max(lengths.values())
    for floor in dict.fromkeys((max(min_chunk, EFFICIENT_CHUNK), min_chunk)):
        for flights in dict.fromkeys((in_flight, 1)):
            for k in range(len(STREAM_ORDER) + 1):
                streamed = tuple(which for which in MSM_NAMES if which in STREAM_ORDER[:k])
                for chunk in _chunk_candidates(floor, longest):
                    yield streamed, chunk, flights


def plan_memory(dims: KeyDims, budget: int, want_group: int = 1, *, in_flight: int = 2, overhead: int = 0,
                min_chunk: int = MIN_CHUNK, scratch: MsmScratch = gpu_msm_scratch) -> WorkerPlan:
    """The device plan of a key of ``dims`` within ``budget`` bytes for groups of up to
    ``want_group`` proofs and up to ``in_flight`` groups queued at once. ``overhead``: bytes set
    aside unitemised (a GPU worker passes :data:`GPU_OVERHEAD`); ``min_chunk``: the fewest points
    of a chunk (:data:`MIN_CHUNK`; a CPU worker, with no launches to pay for, takes less);
    ``scratch``: the MSM scratch formula. :class:`MemoryBudgetError` when even the smallest plan
    (:func:`minimum_bytes`) exceeds the budget.

    The first that fits with one proof, in this order: every MSM whole and resident; the MSMs in
    chunks of :data:`MAX_CHUNK` down to :data:`EFFICIENT_CHUNK` points, with the fewest base
    arrays streamed (:data:`STREAM_ORDER`) and, that failing, one group in flight; then the same
    down to ``min_chunk``. The group is then the largest that fits, up to ``want_group``."""
    if budget <= 0:
        raise MemoryBudgetError(f"memory budget must be positive (got {budget} bytes)")
    want_group, in_flight = max(1, int(want_group)), max(1, int(in_flight))
    lengths = dims.lengths()

    def total(streamed: tuple[str, ...], chunk: int, proofs: int, flights: int) -> int:
        return sum(_parts(dims, streamed, chunk, proofs, flights, overhead, scratch).values())

    for streamed, chunk, flights in _tries(lengths, in_flight, min_chunk):
        if total(streamed, chunk, 1, flights) > budget:
            continue
        lo, hi = 1, want_group  # the largest group that fits, by bisection (total grows with it)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if total(streamed, chunk, mid, flights) <= budget:
                lo = mid
            else:
                hi = mid - 1
        if chunk >= max(lengths.values()) and not streamed:
            chunk = 0  # no MSM is longer than a chunk: every MSM whole
        parts = _parts(dims, streamed, chunk, lo, flights, overhead, scratch)
        resident = tuple(which for which in MSM_NAMES if which not in streamed)
        return WorkerPlan(budget, resident, streamed, chunk, lo, flights, lengths, parts)
    raise MemoryBudgetError(
        f"a memory budget of {_size(budget)} does not hold this key (n_vars {dims.n_vars}, domain "
        f"{dims.domain_size}): its smallest plan (one proof a group, one group in flight, bases streamed "
        f"in chunks of at least {min_chunk} points) needs "
        f"{_size(minimum_bytes(dims, overhead=overhead, min_chunk=min_chunk, scratch=scratch))}")


def minimum_bytes(dims: KeyDims, *, overhead: int = 0, min_chunk: int = MIN_CHUNK,
                  scratch: MsmScratch = gpu_msm_scratch) -> int:
    """Bytes of the key's smallest plan: the least of every plan :func:`plan_memory` tries, with one
    proof and one group in flight."""
    lengths = dims.lengths()
    return min(sum(_parts(dims, streamed, chunk, 1, 1, overhead, scratch).values())
               for streamed, chunk, _ in _tries(lengths, 1, min_chunk))


def _size(n: int) -> str:
    """``n`` bytes for a message: GiB, MiB or KiB with the exact count."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.2f} {unit} ({n} bytes)"
    return f"{n} bytes"
