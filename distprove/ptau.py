"""``ptau prepare`` (snarkjs ``powersoftau prepare phase2``, byte-identical) and ``ptau new --dev``.

prepare: the output keeps sections 2-7 of the input unchanged, rewrites the header with
ceremonyPower = power and appends the Lagrange sections 12-15 (SNARKJS_FORMATS.md §5.1, §9):
level p of a section is the size-2^p group inverse DFT of the first 2^p points of its source
(tauG1 2 → 12 with levels 0 … power+1, the last one's missing input being infinity; tauG2 3 → 13,
alphaTauG1 4 → 14, betaTauG1 5 → 15 with levels 0 … power), scaled by 2^-p, affine LEM,
levels concatenated (level p at point offset 2^p − 1). At power 28 tauG1's level 29 exceeds the
2-adicity of Fr and is ffjavascript's coset construction (:func:`level_points`).

In process, sections are produced level by level and streamed into the file, so only one level
of one section is ever in host memory (besides the memory-mapped input). With a Dask client
(:class:`LevelFeed`) every (section, level) is one task ``("ptau-level", section name, p, tag)``
whose worker reads its input rows from the file itself, or, for the largest levels
(``distprove.ptau.block-points``, :func:`blocked_levels`), a *blocked* level: level p's radix-2
DIT split once, four-step style with two rows, into two tasks ``("ptau-half", name, p, b, tag)`` (the unscaled size-2^(p-1) iDFTs of the even
and odd inputs, :func:`half_points`) and one task per column range ``("ptau-columns", name, p,
first, tag)`` (the last butterfly stage with the 1/n scaling, out[i] and out[i + 2^(p-1)] from
column i of both halves, :func:`column_points`). Levels are submitted largest first while at most
``distprove.ptau.held-bytes`` of them are in flight; the output file is laid out first and the
client writes every piece in place as it arrives, so the order of completion does not matter.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np

from . import bn254
from .backends import BACKEND_NAMES
from .bn254 import FR_S, FR_SHIFT, G1, G2, R, Group
from .errors import BackendUnavailable, FormatError
from .formats.container import Reserved
from .formats.ptau import Ptau, PtauHeader, read_ptau, write_ptau

log = logging.getLogger(__name__)

DEV_WARNING = (
    "distprove ptau new --dev: INSECURE powers of tau for tests and benchmarks only - tau, alpha "
    "and beta are known to this process (no ceremony); never use it for real keys"
)

# (source section, Lagrange section, group, extra level for tauG1)
LAGRANGE_SECTIONS: tuple[tuple[int, int, Group, bool], ...] = (
    (2, 12, G1, True),
    (3, 13, G2, False),
    (4, 14, G1, False),
    (5, 15, G1, False),
)
SOURCE_NAMES = {2: "tauG1", 3: "tauG2", 4: "alphaTauG1", 5: "betaTauG1"}


def _check_backend(backend: str) -> None:
    if backend not in BACKEND_NAMES:
        raise ValueError(f"backend must be one of {', '.join(BACKEND_NAMES)}, not {backend!r}")


def resolve_backend(backend: str) -> str:
    """"cpu" or "gpu" for a requested "auto" | "cpu" | "gpu" ("auto": the GPU when CuPy sees one)."""
    _check_backend(backend)
    if backend == "cpu":
        return "cpu"
    from .backends.gpu import available

    if available():
        return "gpu"
    if backend == "gpu":
        raise BackendUnavailable("backend 'gpu' requested but CuPy sees no CUDA device")
    return "cpu"


def level_input(section: np.ndarray, p: int, group: Group) -> np.ndarray:
    """The 2^p input points of level p: the section's first 2^p rows, padded with infinity (zero
    rows) when the section is shorter (tauG1 at level power+1 has 2^(power+1) − 1 points)."""
    n = 1 << p
    rows = np.asarray(section[:n])
    if rows.shape[0] == n:
        return rows
    pad = np.zeros((n - rows.shape[0], group.limbs), dtype="<u4")
    return np.concatenate([rows, pad])


def level_points(group: Group, section: np.ndarray, p: int, backend: str = "cpu") -> np.ndarray:
    """Lagrange level p of one source section as (2^p, 16|32) Montgomery limbs.

    p ≤ 28: the inverse DFT over ⟨Fr.w[p]⟩. p = 29 (tauG1 of a power-28 file): the Lagrange
    points of ⟨Fr.w[28]⟩ ∪ 25·⟨Fr.w[28]⟩, as ffjavascript's ``lagrangeEvaluations`` builds them.
    Callable on its own (one level, one section), e.g. from a Dask task.
    """
    inp = level_input(section, p, group)
    if backend == "gpu":
        from .backends.gpu.groupfft import coset_level_gpu, ifft_level_gpu

        return coset_level_gpu(group, inp, FR_S, FR_SHIFT) if p > FR_S else ifft_level_gpu(group, inp)
    from .backends.cpu.groupfft import coset_level, ifft_level

    return coset_level(group, inp, FR_S, FR_SHIFT) if p > FR_S else ifft_level(group, inp)


def half_points(group: Group, section: np.ndarray, p: int, b: int, backend: str = "cpu") -> np.ndarray:
    """Half ``b`` of blocked level p (1 ≤ p ≤ 28): the unscaled size-2^(p-1) inverse DFT
    (ω = Fr.w[p-1] = Fr.w[p]²) of the level's inputs in[b], in[b+2], … (b = 0 even, 1 odd)."""
    inp = np.ascontiguousarray(level_input(section, p, group)[b::2])
    if backend == "gpu":
        from .backends.gpu.groupfft import half_level_gpu

        return half_level_gpu(group, inp)
    from .backends.cpu.groupfft import half_level

    return half_level(group, inp)


def column_points(group: Group, p: int, first: int, a0: np.ndarray, a1: np.ndarray, backend: str = "cpu") -> np.ndarray:
    """Rows ``first`` … first+w−1 of level p from rows first … of its halves a0, a1 ((w, 16|32) each),
    then the rows 2^(p-1) + first … : level[i] = [s]a0[i] + [s·ω^-i]a1[i] and
    level[i + 2^(p-1)] = [s]a0[i] − [s·ω^-i]a1[i] with ω = Fr.w[p], s = 2^-p."""
    if backend == "gpu":
        from .backends.gpu.groupfft import column_stage_gpu

        return column_stage_gpu(group, a0, a1, p, first)
    from .backends.cpu.groupfft import column_stage

    return column_stage(group, a0, a1, p, first)


def _sources(src: Ptau) -> dict[int, np.ndarray]:
    return {2: src.tau_g1, 3: src.tau_g2, 4: src.alpha_tau_g1, 5: src.beta_tau_g1}


@dataclass(frozen=True)
class LevelTask:
    """One Lagrange level of a prepare: source section ``sid`` → Lagrange section ``lid``, level ``p``."""

    sid: int
    lid: int
    group: Group
    p: int

    @property
    def name(self) -> str:
        """The source section's name (tauG1, tauG2, alphaTauG1, betaTauG1)."""
        return SOURCE_NAMES[self.sid]

    @property
    def nbytes(self) -> int:
        """Bytes of the level's output (2^p points)."""
        return (1 << self.p) * self.group.limbs * 4

    @property
    def cost(self) -> int:
        """Relative work, the scheduling priority: ladder multiplications ∝ 2^p·(p+1), a G2 one
        about four times a G1 one (measured on the H200: 5.15 s against 1.22 s at 2^20)."""
        return (1 << self.p) * (self.p + 1) * (4 if self.group is G2 else 1)



def level_tasks(power: int) -> list[LevelTask]:
    """Every level of a prepare at ``power`` in file order: section 12 levels 0 … power+1, then
    13, 14, 15 levels 0 … power."""
    return [
        LevelTask(sid, lid, group, p)
        for sid, lid, group, extra in LAGRANGE_SECTIONS
        for p in range((power + 1 if extra else power) + 1)
    ]


def compute_level(in_path: str, sid: int, p: int, backend: str, power: int) -> tuple[np.ndarray, float]:
    """Dask task body: level ``p`` of source section ``sid`` of the ptau at ``in_path``, read on
    the worker (only the 2^p rows the level needs are touched through the memory map).

    ``backend`` is resolved here, on the worker; ``power`` is the client's reading of the file, so a
    worker that sees a different file under the same path fails instead of writing wrong points.
    Returns (points, seconds).
    """
    t0 = time.perf_counter()
    src = _read_same(in_path, power)
    out = level_points(_group(sid), _sources(src)[sid], p, resolve_backend(backend))
    return out, time.perf_counter() - t0


def _group(sid: int) -> Group:
    return next(g for s, _, g, _ in LAGRANGE_SECTIONS if s == sid)


def _read_same(in_path: str, power: int) -> Ptau:
    src = read_ptau(in_path)
    if src.power != power:
        raise FormatError(in_path, f"power {src.power} on a worker but {power} on the client (not the same file?)")
    return src


def compute_half(in_path: str, sid: int, p: int, b: int, backend: str, power: int) -> tuple[np.ndarray, float]:
    """Dask task body: half ``b`` of blocked level ``p`` of source section ``sid`` (:func:`half_points`),
    read on the worker as :func:`compute_level` does. Returns (points, seconds)."""
    t0 = time.perf_counter()
    src = _read_same(in_path, power)
    out = half_points(_group(sid), _sources(src)[sid], p, b, resolve_backend(backend))
    return out, time.perf_counter() - t0


def compute_columns(
    sid: int, p: int, first: int, count: int, half0: tuple[np.ndarray, float], half1: tuple[np.ndarray, float], backend: str
) -> tuple[np.ndarray, float]:
    """Dask task body: columns ``first`` … first+count−1 of blocked level ``p`` from the results of
    its two :func:`compute_half` tasks (:func:`column_points`): 2·count rows, those of level rows
    first … then 2^(p-1) + first … . Returns (points, seconds), the seconds of the first range
    counting the halves' too (so a level's pieces add up to its worker time)."""
    t0 = time.perf_counter()
    rows = slice(first, first + count)
    out = column_points(_group(sid), p, first, half0[0][rows], half1[0][rows], resolve_backend(backend))
    return out, time.perf_counter() - t0 + (half0[1] + half1[1] if first == 0 else 0.0)


def _local_levels(src: Ptau, tasks: list[LevelTask], backend: str) -> Iterator[np.ndarray]:
    """The points of ``tasks`` (one section's levels, in order) computed in this process."""
    for t in tasks:
        t0 = time.perf_counter()
        out = level_points(t.group, _sources(src)[t.sid], t.p, backend)
        log.info("ptau prepare: %s level %d (%d points) in %.2f s", t.name, t.p, 1 << t.p, time.perf_counter() - t0)
        yield out


def held_bytes_budget(client: Any, tasks: list[LevelTask], held_bytes: int | None = None) -> int:
    """The budget of bytes of levels in flight (submitted and not completely written): ``held_bytes``,
    else ``distprove.ptau.held-bytes``, else one top level per worker thread (at least two)."""
    if held_bytes is None:
        from .config import get_bytes

        held_bytes = get_bytes("ptau.held-bytes")
    elif held_bytes <= 0:
        raise ValueError(f"held_bytes must be positive, not {held_bytes}")
    if held_bytes is not None:
        return held_bytes
    return max(2, _slots(client)) * max(t.nbytes for t in tasks)


def _slots(client: Any) -> int:
    return sum(client.nthreads().values())


def block_points() -> int | str | None:
    """``distprove.ptau.block-points``: "auto", a point count (≥ 2) or None; FormatError otherwise."""
    from .config import get

    value = get("ptau.block-points")
    if value is None or value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 2):
        return value
    raise FormatError("distprove.ptau.block-points", f"must be auto, a number of points >= 2 or null (got {value!r})")


def blocked_levels(tasks: list[LevelTask], block_points: int | str | None, workers: int) -> set[int]:
    """Indices of the levels to block: with "auto" those whose :attr:`LevelTask.cost` exceeds
    1/workers of the whole prepare's (a level that alone would outlast a worker's share: the
    critical path); with a number, those of at least that many points; with None, none. tauG1's
    level 29 at power 28, built over a coset, never is. (At power 20 on 2 H200s blocking the
    top tauG2 level, 27% of the work, gave 1.80x one GPU against 1.91x unblocked: the split's
    halves and column stage cost more than the balance won.)"""
    total = sum(t.cost for t in tasks)

    def block(t: LevelTask) -> bool:
        if block_points is None or not 1 <= t.p <= FR_S:
            return False
        if block_points == "auto":
            return t.cost * workers > total
        return (1 << t.p) >= int(block_points)

    return {i for i, t in enumerate(tasks) if block(t)}


Writer = Callable[[LevelTask, int, np.ndarray], object]
"""``write(level, first_row, rows)``: put rows first_row … of a level's points in the output."""


class LevelFeed:
    """Runs the level tasks of one prepare on a Dask cluster and hands every finished piece to a writer.

    Levels are submitted largest first (:attr:`LevelTask.cost`, also the tasks' priority) while the
    bytes of levels submitted and not completely written stay within ``budget`` (a level is always
    submitted when nothing else is, so one larger than the budget runs alone). The levels
    :func:`blocked_levels` picks for ``block_points`` and ``columns`` workers are blocked (module
    docstring): two half tasks, then ``columns`` column tasks (fewer when a half is shorter), which
    outrank every level so the halves' memory is freed soon. Pieces are fetched to the client one
    at a time, in completion order.
    """

    def __init__(
        self, client: Any, in_path: str, backend: str, power: int, budget: int,
        block_points: int | str | None = None, columns: int = 2,
    ) -> None:
        from distributed import as_completed

        self.client = client
        self.in_path = in_path
        self.backend = backend
        self.power = power
        self.budget = budget
        self.columns = columns
        self.tasks = level_tasks(power)
        self.blocked = blocked_levels(self.tasks, block_points, columns)
        self.order = sorted(range(len(self.tasks)), key=lambda i: -self.tasks[i].cost)
        self.top = max(t.cost for t in self.tasks)
        self.tag = uuid.uuid4().hex[:12]
        self.done = as_completed()
        self.pieces: dict[Any, tuple[int, int, int]] = {}
        """Future key → (level index, first row, rows) of the pieces in flight."""
        self.futures: dict[Any, Any] = {}
        self.left: dict[int, int] = {}
        """Level index → pieces not yet written."""
        self.seconds: dict[int, float] = {}
        self.submitted = 0
        self.reserved = 0
        self.peak_reserved = 0
        """The most bytes of levels in flight at any time (for tests and logs)."""

    def _submit_piece(self, fn: Any, args: tuple, key: tuple, priority: int, piece: tuple[int, int, int] | None) -> Any:
        fut = self.client.submit(fn, *args, key=key, priority=priority, pure=False)
        if piece is not None:
            self.pieces[fut.key] = piece
            self.futures[fut.key] = fut
            self.done.add(fut)
        return fut

    def _submit_level(self, i: int) -> None:
        t = self.tasks[i]
        common = (self.in_path, t.sid, t.p)
        if i not in self.blocked:
            self._submit_piece(compute_level, (*common, self.backend, self.power), ("ptau-level", t.name, t.p, self.tag),
                               t.cost, (i, 0, 1 << t.p))
            self.left[i] = 1
            return
        halves = [
            self._submit_piece(compute_half, (*common, b, self.backend, self.power), ("ptau-half", t.name, t.p, b, self.tag),
                               t.cost, None)
            for b in (0, 1)
        ]
        half = 1 << (t.p - 1)
        parts = min(self.columns, half)
        bounds = [half * c // parts for c in range(parts + 1)]
        for first, end in zip(bounds, bounds[1:]):
            self._submit_piece(compute_columns, (t.sid, t.p, first, end - first, *halves, self.backend),
                               ("ptau-columns", t.name, t.p, first, self.tag), self.top + t.cost, (i, first, end - first))
        self.left[i] = parts

    def _submit(self) -> None:
        while self.submitted < len(self.order):
            i = self.order[self.submitted]
            nbytes = self.tasks[i].nbytes
            if self.reserved and self.reserved + nbytes > self.budget:
                return
            self._submit_level(i)
            self.reserved += nbytes
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            self.submitted += 1

    def run(self, write: Writer) -> None:
        """Compute every level and hand each piece to ``write`` as it arrives; a column piece is two
        calls (its rows of the first, then of the second half of the level)."""
        self._submit()
        while self.pieces:
            fut = next(self.done)
            i, first, count = self.pieces.pop(fut.key)
            points, seconds = fut.result()
            del self.futures[fut.key], fut
            t = self.tasks[i]
            whole = count == 1 << t.p  # else a column piece: count rows of each half of the level
            if points.shape != ((1 if whole else 2) * count, t.group.limbs):
                raise RuntimeError(f"ptau prepare: {t.name} level {t.p}: a task returned {points.shape} for {count} rows at {first}")
            write(t, first, points[:count])
            if not whole:
                write(t, (1 << (t.p - 1)) + first, points[count:])
            self.seconds[i] = self.seconds.get(i, 0.0) + seconds
            self.left[i] -= 1
            if not self.left[i]:
                del self.left[i]
                self.reserved -= t.nbytes
                log.info("ptau prepare: %s level %d (%d points%s) in %.2f s of worker time", t.name, t.p, 1 << t.p,
                         ", blocked" if i in self.blocked else "", self.seconds[i])
                self._submit()

    def cancel(self) -> None:
        """Cancel the tasks still running or queued (after an error)."""
        if self.futures:
            self.client.cancel(list(self.futures.values()))
        self.futures.clear()
        self.pieces.clear()


def _header_and_copies(src: Ptau) -> tuple[PtauHeader, dict[int, object]]:
    sections: dict[int, object] = {**_sources(src), 6: src.beta_g2.reshape(1, -1), 7: src.contributions}
    return PtauHeader(power=src.power, ceremony_power=src.power), sections


def prepare(
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    backend: str = "auto",
    client: Any = None,
    *,
    scheduler: str | None = None,
    n_workers: int | None = None,
    held_bytes: int | None = None,
) -> None:
    """Write ``out_path``: ``in_path`` prepared for phase 2, byte-identical to
    ``snarkjs powersoftau prepare phase2 in out`` (sections 1-7 and 12-15, nSections 11).

    ``backend``: "auto" (GPU when available), "cpu" or "gpu". In this process by default; on a Dask
    cluster when ``client`` (a ``distributed.Client``), ``scheduler`` (an address) or ``n_workers``
    (a local cluster: one worker per GPU, else CPU processes; :func:`distprove.cluster.client.connect`) is
    given. Then every level (or block of a large level) is a task, the workers read ``in_path``
    themselves (so they must see it under the same path; it is made absolute here), the backend is
    resolved on each worker, and at most ``held_bytes`` of levels are in flight (default:
    :func:`held_bytes_budget`). The output is written atomically either way. Raises FormatError on a
    bad input, BackendUnavailable when "gpu" is asked for without a device.
    """
    if client is None and scheduler is None and n_workers is None:
        be = resolve_backend(backend)
        src = read_ptau(in_path)
        header, sections = _header_and_copies(src)
        tasks = level_tasks(src.power)
        for _, lid, _, _ in LAGRANGE_SECTIONS:
            sections[lid] = _local_levels(src, [t for t in tasks if t.lid == lid], be)
        write_ptau(out_path, header, sections)  # type: ignore[arg-type]
        return
    _check_backend(backend)
    src = read_ptau(in_path)  # a bad input fails here, before any cluster starts
    from .cluster.client import connect

    with connect(client, scheduler=scheduler, backend=backend, n_workers=n_workers) as c:
        prepare_on(c, src, out_path, backend, held_bytes)


def prepare_on(client: Any, src: Ptau, out_path: str | os.PathLike[str], backend: str, held_bytes: int | None = None) -> LevelFeed:
    """The Dask part of :func:`prepare`: write ``out_path`` from the parsed input ``src`` with the
    levels computed on ``client``'s workers (blocked as ``distprove.ptau.block-points`` says, one
    column range per worker thread); returns the finished :class:`LevelFeed` (its
    ``peak_reserved`` says how many bytes of levels were in flight at most)."""
    header, sections = _header_and_copies(src)
    tasks = level_tasks(src.power)
    for _, lid, _, _ in LAGRANGE_SECTIONS:
        sections[lid] = Reserved(sum(t.nbytes for t in tasks if t.lid == lid))
    budget = held_bytes_budget(client, tasks, held_bytes)
    feed = LevelFeed(client, os.path.abspath(src.path), backend, src.power, budget, block_points(), max(2, _slots(client)))

    def fill(f: BinaryIO, offsets: dict[int, int]) -> None:
        def write(t: LevelTask, first: int, rows: np.ndarray) -> None:
            row_bytes = t.group.limbs * 4
            f.seek(offsets[t.lid] + ((1 << t.p) - 1 + first) * row_bytes)
            f.write(memoryview(np.ascontiguousarray(rows, dtype="<u4")).cast("B"))

        feed.run(write)

    t0 = time.perf_counter()
    try:
        write_ptau(out_path, header, sections, fill)  # type: ignore[arg-type]
    except BaseException:
        feed.cancel()
        raise
    log.info("ptau prepare: %d levels on the cluster in %.2f s, at most %d bytes of levels in flight (budget %d)",
             len(tasks), time.perf_counter() - t0, feed.peak_reserved, budget)
    return feed


# --- ptau new --dev ----------------------------------------------------------------------


def dev_secrets(seed: int | None) -> tuple[int, int, int]:
    """(τ, α, β), nonzero in Fr: from ``seed`` (reproducible) or from :mod:`secrets`."""
    if seed is None:
        return tuple(1 + secrets.randbelow(R - 1) for _ in range(3))  # type: ignore[return-value]
    rng = random.Random(f"distprove-ptau-dev-{seed}")
    return tuple(rng.randrange(1, R) for _ in range(3))  # type: ignore[return-value]


def new_dev(
    out_path: str | os.PathLike[str], power: int, seed: int | None = None, device: str = "auto", workers: int = 1,
    warn: bool = True,
) -> tuple[int, int, int]:
    """Write an INSECURE .ptau of ``power`` (sections 1-7 as ``snarkjs powersoftau new`` lays them
    out, zero contribution records) for random τ, α, β; returns (τ, α, β).

    tauG1 = [τ^i]₁ (i < 2N − 1), tauG2 = [τ^i]₂, alphaTauG1 = [α·τ^i]₁, betaTauG1 = [β·τ^i]₁
    (i < N), betaG2 = [β]₂, N = 2^power, by fixed-base multiplication (GPU when ``device`` allows).
    """
    from .curve import fast_int
    from .devsetup import fixed_base
    from .formats.ptau import MAX_POWER

    if not 1 <= power <= MAX_POWER:
        raise ValueError(f"power must be in 1 … {MAX_POWER}, not {power}")
    if warn:
        print("WARNING: " + DEV_WARNING, file=sys.stderr)
    tau, alpha, beta = dev_secrets(seed)
    n = 1 << power
    tpow = bn254.powers(fast_int(tau), 2 * n - 1)

    def pts(group: Group, scalars: np.ndarray) -> np.ndarray:
        return fixed_base(group, bn254.limbs_from_ints(scalars), device=device, workers=workers)

    sections = {
        2: pts(G1, tpow),
        3: pts(G2, tpow[:n]),
        4: pts(G1, tpow[:n] * alpha % R),
        5: pts(G1, tpow[:n] * beta % R),
        6: pts(G2, np.array([beta], dtype=object)),
        7: np.zeros(4, dtype=np.uint8),
    }
    write_ptau(out_path, PtauHeader(power=power, ceremony_power=power), sections)  # type: ignore[arg-type]
    return tau, alpha, beta
