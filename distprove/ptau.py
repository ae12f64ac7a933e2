"""``ptau prepare`` (snarkjs ``powersoftau prepare phase2``, byte-identical) and ``ptau new --dev``.

prepare: the output keeps sections 2-7 of the input unchanged, rewrites the header with
ceremonyPower = power and appends the Lagrange sections 12-15 (SNARKJS_FORMATS.md §5.1, §9):
level p of a section is the size-2^p group inverse DFT of the first 2^p points of its source
(tauG1 2 → 12 with levels 0 … power+1, the last one's missing input being infinity; tauG2 3 → 13,
alphaTauG1 4 → 14, betaTauG1 5 → 15 with levels 0 … power), scaled by 2^-p, affine LEM,
levels concatenated (level p at point offset 2^p − 1). At power 28 tauG1's level 29 exceeds the
2-adicity of Fr and is ffjavascript's coset construction (:func:`level_points`).

Sections are produced level by level and streamed into the file, so only one level of one
section is ever in host memory (besides the memory-mapped input). With a Dask client every
(section, level) is one task ``("ptau-level", section name, p, tag)`` whose worker reads its input
rows from the file itself; the client writes the results in file order and keeps at most
``distprove.ptau.held-bytes`` of levels in flight or waiting for their turn (:class:`LevelFeed`).
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
from typing import Any, Iterator

import numpy as np

from .bn254 import FR_S, FR_SHIFT, G1, G2, R, Group
from .errors import BackendUnavailable, FormatError
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
    if backend not in ("auto", "cpu", "gpu"):
        raise ValueError(f"backend must be auto, cpu or gpu, not {backend!r}")


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
    src = read_ptau(in_path)
    if src.power != power:
        raise FormatError(in_path, f"power {src.power} on a worker but {power} on the client (not the same file?)")
    group = next(g for s, _, g, _ in LAGRANGE_SECTIONS if s == sid)
    out = level_points(group, _sources(src)[sid], p, resolve_backend(backend))
    return out, time.perf_counter() - t0


def _local_levels(src: Ptau, tasks: list[LevelTask], backend: str) -> Iterator[np.ndarray]:
    """The points of ``tasks`` (one section's levels, in order) computed in this process."""
    for t in tasks:
        t0 = time.perf_counter()
        out = level_points(t.group, _sources(src)[t.sid], t.p, backend)
        log.info("ptau prepare: %s level %d (%d points) in %.2f s", t.name, t.p, 1 << t.p, time.perf_counter() - t0)
        yield out


def held_bytes_budget(client: Any, tasks: list[LevelTask], held_bytes: int | None = None) -> int:
    """The client's budget for levels in flight or waiting to be written: ``held_bytes``, else
    ``distprove.ptau.held-bytes``, else one top level per worker thread (at least two)."""
    if held_bytes is None:
        from .config import get_bytes

        held_bytes = get_bytes("ptau.held-bytes")
    elif held_bytes <= 0:
        raise ValueError(f"held_bytes must be positive, not {held_bytes}")
    if held_bytes is not None:
        return held_bytes
    slots = sum(client.nthreads().values())
    return max(2, slots) * max(t.nbytes for t in tasks)


class LevelFeed:
    """Runs the level tasks of one prepare on a Dask cluster and hands their points back in file order.

    Tasks are submitted in file order while the bytes of levels submitted and not yet written stay
    within ``budget`` (a level is always submitted when nothing else is, so one larger than the
    budget runs alone); among those submitted, larger levels have higher priority. Finished levels
    are fetched to the client and held until their turn, so the client holds at most ``budget``
    bytes of levels plus the one being written.
    """

    def __init__(self, client: Any, in_path: str, backend: str, power: int, budget: int) -> None:
        from distributed import as_completed

        self.client = client
        self.in_path = in_path
        self.backend = backend
        self.power = power
        self.budget = budget
        self.tasks = level_tasks(power)
        self.tag = uuid.uuid4().hex[:12]
        self.done = as_completed()
        self.index = {self._key(i): i for i in range(len(self.tasks))}
        self.futures: dict[int, Any] = {}
        self.held: dict[int, np.ndarray] = {}
        self.submitted = 0
        self.cursor = 0
        self.reserved = 0
        self.peak_reserved = 0
        """The most bytes of levels submitted and not yet handed out at any time (for tests and logs)."""

    def _key(self, i: int) -> tuple[str, str, int, str]:
        t = self.tasks[i]
        return ("ptau-level", t.name, t.p, self.tag)

    def _submit(self) -> None:
        n = len(self.tasks)
        while self.submitted < n:
            i = self.submitted
            t = self.tasks[i]
            if self.reserved and self.reserved + t.nbytes > self.budget:
                return
            fut = self.client.submit(
                compute_level, self.in_path, t.sid, t.p, self.backend, self.power,
                key=self._key(i), priority=t.nbytes * n + (n - i), pure=False,
            )
            self.futures[i] = fut
            self.done.add(fut)
            self.reserved += t.nbytes
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            self.submitted += 1

    def _fetch_one(self) -> None:
        fut = next(self.done)
        i = self.index[fut.key]
        points, seconds = fut.result()
        del self.futures[i], fut
        t = self.tasks[i]
        self.held[i] = points
        log.info("ptau prepare: %s level %d (%d points) in %.2f s on a worker", t.name, t.p, 1 << t.p, seconds)

    def take(self, lid: int, p: int) -> np.ndarray:
        """The points of level ``p`` of Lagrange section ``lid``, which must be the next in file order.

        The level handed out before counts as written from here on."""
        t = self.tasks[self.cursor]
        if (t.lid, t.p) != (lid, p):
            raise RuntimeError(f"levels are taken in file order: expected section {t.lid} level {t.p}, got {lid} level {p}")
        if self.cursor:
            self.reserved -= self.tasks[self.cursor - 1].nbytes
        self._submit()
        while self.cursor not in self.held:
            self._fetch_one()
        self.cursor += 1
        return self.held.pop(self.cursor - 1)

    def section(self, lid: int) -> Iterator[np.ndarray]:
        """The levels of Lagrange section ``lid`` in order, for :func:`write_ptau`."""
        for t in self.tasks:
            if t.lid == lid:
                yield self.take(lid, t.p)

    def cancel(self) -> None:
        """Cancel the tasks still running or queued (after an error)."""
        if self.futures:
            self.client.cancel(list(self.futures.values()))
        self.futures.clear()
        self.held.clear()


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
    (a local cluster: one worker per GPU, else CPU processes; :func:`distprove.cluster.connect`) is
    given. Then every level is a task, the workers read ``in_path`` themselves (so they must see it
    under the same path; it is made absolute here), the backend is resolved on each worker, and
    the client holds at most ``held_bytes`` of levels (default: :func:`held_bytes_budget`). The
    output is written atomically either way. Raises FormatError on a bad input,
    BackendUnavailable when "gpu" is asked for without a device.
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
    from .cluster import connect

    with connect(client, scheduler=scheduler, backend=backend, n_workers=n_workers) as c:
        prepare_on(c, src, out_path, backend, held_bytes)


def prepare_on(client: Any, src: Ptau, out_path: str | os.PathLike[str], backend: str, held_bytes: int | None = None) -> LevelFeed:
    """The Dask part of :func:`prepare`: write ``out_path`` from the parsed input ``src`` with the
    levels computed on ``client``'s workers; returns the finished :class:`LevelFeed` (its
    ``peak_reserved`` says how many bytes of levels were held at most)."""
    header, sections = _header_and_copies(src)
    tasks = level_tasks(src.power)
    budget = held_bytes_budget(client, tasks, held_bytes)
    feed = LevelFeed(client, os.path.abspath(src.path), backend, src.power, budget)
    for _, lid, _, _ in LAGRANGE_SECTIONS:
        sections[lid] = feed.section(lid)
    t0 = time.perf_counter()
    try:
        write_ptau(out_path, header, sections)  # type: ignore[arg-type]
    except BaseException:
        feed.cancel()
        raise
    log.info("ptau prepare: %d levels on the cluster in %.2f s, at most %d bytes of levels held (budget %d)",
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
    from .devsetup import fixed_base, powers
    from .formats.ptau import MAX_POWER
    from .synth import limbs_from_field

    if not 1 <= power <= MAX_POWER:
        raise ValueError(f"power must be in 1 … {MAX_POWER}, not {power}")
    if warn:
        print("WARNING: " + DEV_WARNING, file=sys.stderr)
    tau, alpha, beta = dev_secrets(seed)
    n = 1 << power
    tpow = powers(tau, 2 * n - 1)

    def pts(group: Group, scalars: np.ndarray) -> np.ndarray:
        return fixed_base(group, limbs_from_field(scalars), device=device, workers=workers)

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
