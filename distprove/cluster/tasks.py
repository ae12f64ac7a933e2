"""The data that Dask tasks exchange: what to prove, a key's planning description, the results
of each task kind, and how a proof ended (its one-line reason: :func:`failure_reason`). Plain
dataclasses (they travel pickled)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from distprove import bn254
from distprove.errors import one_line

if TYPE_CHECKING:
    from distprove.witness.pool import WitnessSource


@dataclass(frozen=True)
class ProofSpec:
    """One proof to make: where its witness is, which key proves it, where its outputs go;
    ``source``: in an input batch whose proof tasks stream, what computes the witness (the proof
    task waits for it: :class:`~distprove.witness.pool.WitnessSource`, :func:`~distprove.witness.pool.await_witness`)."""

    name: str
    witness: str
    key_path: str
    content_hash: str
    proof_path: str
    public_path: str
    source: WitnessSource | None = None


@dataclass(frozen=True)
class KeyInfo:
    """What the client needs to plan a key's proofs (from a worker: it has the backend)."""

    path: str
    content_hash: str
    n_vars: int
    n_public: int
    domain_size: int
    widths: dict[str, int]
    backend: str
    native_fourstep: bool
    vk: dict = field(default_factory=dict)
    """verification_key.json content (for checks made off the workers)."""
    points: dict = field(default_factory=dict)
    """alpha1, beta1, beta2, delta1, delta2 as affine ints (for proofs assembled off the workers)."""
    nbytes: int = 0
    """Bytes of the key's point and CSR arrays (``ResidentKey.nbytes``; 0: unknown)."""
    budget: int | None = None
    """The memory budget of the worker that opened the key, in bytes
    (:func:`distprove.cluster.footprint.worker_budget`; None: unbounded)."""


@dataclass
class Prepared:
    """A prepare task's result: the H scalars (when downloaded) or the evaluations a, b, c.

    On the worker that prepared the proof the backend-side witness (and H scalars) are kept in
    its :class:`ProverState` under ``token`` (unique per prepare attempt); an MSM task elsewhere
    reads the witness file again, except in points mode, where the witness values travel in
    ``witness``. ``hs`` is None when the planner kept the H scalars on the device only (data mode).
    """

    hs: np.ndarray | None
    evals: np.ndarray | None
    seconds: dict[str, float] = field(default_factory=dict)
    token: str = ""
    public: list[int] | None = None
    """The public signals w[1..nPublic] (taken from the witness read here, for the reducer)."""
    live: float = 1.0
    """The witness's share of scalars other than 0 and 1 (window widths of a whole-proof MSM task)."""
    witness: np.ndarray | None = None
    """The witness values, (n_vars, 8) uint32 standard form, on the host: points mode, whose
    range tasks take them instead of reading the witness file."""


@dataclass
class MsmPart:
    """The window sums S_lo..S_{hi-1} of one MSM, from one msm-windows task."""

    which: str
    c: int
    sums: dict[int, bn254.Affine]
    seconds: float
    upstream: dict[str, float] = field(default_factory=dict)
    """The prepare task's stage seconds (carried by the A part only, so the reducer sees them once)."""
    token: str = ""
    """The token of the prepare result the sums came from (its reducer drops that cache entry)."""
    public: list[int] | None = None
    """The proof's public signals (carried with ``upstream``, so the reducer need not read the witness)."""


class Status(StrEnum):
    """How a proof ended (a ``str``: the report's JSON and summary show the value)."""

    PROVED = "proved"
    """Its proof and public files exist."""
    FAILED = "failed"
    """Nothing written; the reason says why in one line."""
    SKIPPED = "skipped"
    """Not proved again: its outputs already exist and verify."""


@dataclass
class Outcome:
    """How one proof ended: :attr:`Status.PROVED` (its files exist) or :attr:`Status.FAILED` with the reason."""

    name: str
    status: Status
    reason: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    worker: str = ""
    written_before: bool = False
    """Proved by an earlier attempt of its tasks: this one wrote nothing (nor is it counted again)."""


@dataclass
class Failed:
    """A proof of a :func:`prove_group` task that raised (the group's other proofs went on)."""

    spec: ProofSpec
    reason: str


@dataclass
class Assembled:
    """A reducer's result: one proof, not yet checked or written."""

    spec: ProofSpec
    proof: Any
    seconds: dict[str, float]
    done_before: bool = False
    """True when an earlier attempt already wrote this proof (nothing was assembled)."""


@dataclass
class Collected:
    """A reducer's result when the client assembles: the proof's window sums, gathered."""

    spec: ProofSpec
    parts: list[MsmPart]


def flatten(items: Sequence[Any]) -> list[Any]:
    """Task results as a later task receives them, one level of lists undone: a reducer's MSM
    parts (one per msm-windows task in split mode, :func:`msm_proof`'s list of five in data mode),
    verify-write's proofs (one per reducer, a :func:`prove_group` task's list)."""
    out: list[Any] = []
    for it in items:
        out.extend(it if isinstance(it, list) else [it])
    return out


def failure_reason(exc: BaseException) -> str:
    """One line for the exception that failed a proof (or a task of its inputs)."""
    from distributed.scheduler import KilledWorker

    if isinstance(exc, KilledWorker):
        return "workers died while running its tasks too many times (KilledWorker); nothing written"
    return one_line(exc)
