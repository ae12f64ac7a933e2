"""What runs on a Dask worker: the per-worker state (a WorkerPlugin) and the task bodies.

:class:`ProverState` is registered once per cluster (``Client.register_plugin(state,
name=PLUGIN_NAME)``); its ``setup`` makes the worker's backend (the GPU backend compiles or
loads its kernels there) and it keeps opened keys resident, keyed by content hash, in an LRU
bounded by a count and, on a GPU, by free device memory. It also keeps the backend-side witness
and H scalars of the last few proofs prepared here (:class:`ResidentProof`), so the MSM tasks of
a proof that run on the worker that prepared it upload nothing. Tasks find it with
``distributed.get_worker().plugins[PLUGIN_NAME]``.

The task bodies below are what :mod:`distprove.graph` submits. They read witnesses and keys
from their paths on the worker, call backend and stage functions (no field arithmetic here),
and only small results (window sums, proofs, :class:`Outcome` lists) need to reach the client.
A small proof's one task, :func:`prove_whole`, runs what :func:`prepare`, :func:`msm_proof` and
:func:`reduce_assemble` run, in turn, with the vectors in its locals instead of the proof cache.
The state also keeps each resident key's planning description (:meth:`ProverState.key_info`)
and vk, so a batch of a resident key plans without recomputing them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from distributed import WorkerPlugin, get_worker

from distprove import bn254, config, metrics
from distprove.backends.base import MSM_NAMES
from distprove.backends.cpu import fourstep as cpu_fourstep
from distprove.errors import FormatError, one_line
from distprove.formats.container import first_false, lt_bound
from distprove.formats.jsonio import write_json_atomic
from distprove.keystore import CSR_ARRAYS, POINT_ARRAYS, open_key
from distprove.stages.msm import live_fraction

if TYPE_CHECKING:  # pragma: no cover
    from distprove.prover import WindowSums
    from distprove.verifier import BatchCheck

log = logging.getLogger(__name__)

PLUGIN_NAME = "distprove"
DEFAULT_RESIDENT_PROOFS = 4
"""Proofs whose backend-side vectors a worker keeps (``distprove.proof-cache.count`` overrides)."""


# --- per-worker state ----------------------------------------------------------------------


class ResidentKey:
    """An opened key, kept per worker; with ``keep_host`` its arrays are read from storage once,
    on first use, and then kept in host memory.

    Duck-types the key of :mod:`distprove.backends.base` (header values, ``points``,
    ``vk_json()`` and the point / CSR arrays). A GPU backend keeps its own device copies, so
    there the arrays are not also kept on the host.
    """

    def __init__(self, key: Any, keep_host: bool = True) -> None:
        self._key = key
        self._keep_host = keep_host
        self.path: str = key.path
        self.content_hash: str = key.content_hash
        self.n_vars: int = key.n_vars
        self.n_public: int = key.n_public
        self.domain_size: int = key.domain_size
        self.nbytes: int = sum(
            int(np.prod(getattr(key, n).shape)) * 4 for n in (*POINT_ARRAYS, *CSR_ARRAYS)
        )
        """Bytes of the point and CSR arrays (what a GPU backend keeps on the device)."""
        self._vk_json: dict | None = None

    def vk_json(self) -> dict:
        """The key's verification_key.json content, made once (a .zkey's needs a pairing, ~0.4 s);
        the same dict each time: do not change it."""
        if self._vk_json is None:
            self._vk_json = self._key.vk_json()
        return self._vk_json

    def __getattr__(self, name: str) -> Any:
        if self._keep_host and (name in POINT_ARRAYS or name in CSR_ARRAYS):
            value = np.asarray(getattr(self._key, name)[:])
            self.__dict__[name] = value
            return value
        return getattr(self._key, name)

    def __repr__(self) -> str:
        return f"ResidentKey({self._key!r})"


class TaskFailureLogFilter(logging.Filter):
    """Keeps distributed's "Compute Failed" worker log free of witness data and of expected failures.

    distributed logs a failed task with the repr of its arguments, which for MSM tasks holds the
    witness and the H scalars: that field is withheld. A failure that is one of distprove's own
    errors (a malformed witness, a proof that does not verify) is reported in the batch report with
    its one-line reason, so its traceback is not logged at all.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Compute Failed") or not isinstance(record.args, tuple):
            return True
        args = list(record.args)
        if len(args) >= 4 and any(name in str(args[3]) for name in ("FormatError", "InvalidProofError")):
            return False
        if len(args) >= 3:
            args[2] = "<task arguments withheld by distprove: they may hold witness data>"
            record.args = tuple(args)
        return True


def install_task_log_filter() -> None:
    """Attach :class:`TaskFailureLogFilter` to distributed's worker logger (once per process)."""
    logger = logging.getLogger("distributed.worker")
    if not any(isinstance(f, TaskFailureLogFilter) for f in logger.filters):
        logger.addFilter(TaskFailureLogFilter())


@dataclass
class ResidentProof:
    """One prepared proof's vectors in the backend's representation (on a GPU: device arrays)."""

    content_hash: str
    witness: Any
    hs: Any | None


class ProverState(WorkerPlugin):
    """Per-worker state: the backend, an LRU of resident keys keyed by content hash, and an LRU
    of the backend-side vectors of recently prepared proofs keyed by their prepare's token.

    ``max_keys`` bounds how many keys stay resident (``distprove.key-cache.count``); on the GPU
    backend, ``gpu_bytes`` (``distprove.key-cache.gpu-bytes``) also bounds the bytes of their
    arrays (what the backend uploads, or holds for the key when that is more: its tables of
    window multiples). The least recently used key goes first, never the one in
    use; it is dropped here and, when the backend offers ``evict(content_hash)`` (the GPU
    backend does), from the backend's own per-key state, together with the proofs of that key.
    The proof cache holds at most ``distprove.proof-cache.count`` proofs (read on the worker,
    default :data:`DEFAULT_RESIDENT_PROOFS`); a proof's reducer drops its entry.
    """

    def __init__(self, backend: str = "auto", max_keys: int = 2, gpu_bytes: int | None = None) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be at least 1")
        self.backend_name = backend
        self.max_keys = max_keys
        self.gpu_bytes = gpu_bytes
        self.backend: Any = None
        self._keys: OrderedDict[str, ResidentKey] = OrderedDict()
        self._hash_of_path: dict[str, str] = {}
        self._vks: dict[str, Any] = {}
        self._infos: dict[str, KeyInfo] = {}
        self.max_proofs = DEFAULT_RESIDENT_PROOFS
        self._proofs: OrderedDict[str, ResidentProof] = OrderedDict()
        self._proofs_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """What travels to the workers on registration: no lock, no kept proofs."""
        st = dict(self.__dict__)
        st["_proofs"], st["_proofs_lock"] = OrderedDict(), None
        return st

    def __setstate__(self, st: dict[str, Any]) -> None:
        self.__dict__.update(st)
        self._proofs_lock = threading.Lock()

    @property
    def config(self) -> list:
        """What makes two states interchangeable (registering an equal one again is skipped)."""
        return [self.backend_name, self.max_keys, self.gpu_bytes]

    def setup(self, worker: Any) -> None:
        from distprove.backends.select import get_backend

        install_task_log_filter()
        self.backend = get_backend(self.backend_name)
        count = config.get("proof-cache.count", DEFAULT_RESIDENT_PROOFS)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise FormatError("distprove.proof-cache.count", f"must be an integer >= 0 (got {count!r})")
        self.max_proofs = count
        log.info("distprove worker state on %s: backend %s", worker.address, self.backend.name)

    def teardown(self, worker: Any) -> None:
        self._keys.clear()
        self._hash_of_path.clear()
        self._vks.clear()
        self._infos.clear()
        with self._proofs_lock:
            self._proofs.clear()

    def key(self, path: str, content_hash: str | None = None) -> ResidentKey:
        """The resident key read from ``path`` (opened on first use; checked against ``content_hash``)."""
        h = content_hash or self._hash_of_path.get(path)
        if h is not None and h in self._keys:
            self._keys.move_to_end(h)
            return self._keys[h]
        key = ResidentKey(open_key(path), keep_host=self.backend.name != "gpu")
        if content_hash is not None and key.content_hash != content_hash:
            raise FormatError(path, "the key changed on disk during the batch (content hash differs)")
        self._keys[key.content_hash] = key
        self._hash_of_path[path] = key.content_hash
        self._evict()
        return key

    def vk(self, key: ResidentKey) -> Any:
        """The key's parsed verification key (cached per content hash)."""
        from distprove.formats.jsonio import read_vk

        if key.content_hash not in self._vks:
            self._vks[key.content_hash] = read_vk(key.vk_json())
        return self._vks[key.content_hash]

    def key_info(self, key: ResidentKey, with_vk: bool = False) -> KeyInfo:
        """What the planner needs of a resident key (made once per content hash, so planning a
        batch of a resident key costs a lookup); ``with_vk`` adds the verification key to it."""
        info = self._infos.get(key.content_hash)
        if info is not None and with_vk and not info.vk:
            info = self._infos[key.content_hash] = replace(info, vk=key.vk_json())
        if info is None:
            from distprove.prover import witness_widths

            be = self.backend
            info = self._infos[key.content_hash] = KeyInfo(
                path=key.path,
                content_hash=key.content_hash,
                n_vars=key.n_vars,
                n_public=key.n_public,
                domain_size=key.domain_size,
                widths=witness_widths(be, key),
                backend=be.name,
                native_fourstep=hasattr(be, "fourstep"),
                vk=key.vk_json() if with_vk else {},
                points=dict(key.points),
            )
        return info

    @property
    def resident(self) -> list[str]:
        """Content hashes of the resident keys, least recently used first."""
        return list(self._keys)

    @property
    def resident_paths(self) -> dict[str, str]:
        """The resident keys as {content hash: path they were read from}, least recently used first."""
        return {h: k.path for h, k in self._keys.items()}

    def keep_proof(self, token: str, content_hash: str, witness: Any, hs: Any | None) -> ResidentProof:
        """Keep a prepared proof's backend vectors under ``token`` (dropping the least recently
        used proofs beyond ``max_proofs``); returns the entry (kept only when ``token`` is set)."""
        entry = ResidentProof(content_hash, witness, hs)
        if not token or self.max_proofs < 1:
            return entry
        with self._proofs_lock:
            self._proofs[token] = entry
            while len(self._proofs) > self.max_proofs:
                self._proofs.popitem(last=False)
        return entry

    def proof(self, token: str) -> ResidentProof | None:
        """The vectors kept under ``token`` on this worker, or None (never kept here, or dropped)."""
        with self._proofs_lock:
            entry = self._proofs.get(token)
            if entry is not None:
                self._proofs.move_to_end(token)
            return entry

    def drop_proofs(self, tokens: Sequence[str]) -> None:
        """Forget the proofs kept under ``tokens`` (their reducer ran; unknown tokens are ignored)."""
        with self._proofs_lock:
            for t in tokens:
                self._proofs.pop(t, None)

    @property
    def resident_proofs(self) -> list[str]:
        """Tokens of the proofs whose vectors are kept, least recently used first."""
        with self._proofs_lock:
            return list(self._proofs)

    def fourstep(self) -> ModuleType:
        """The four-step NTT block functions: the backend's own (``backend.fourstep``) or the CPU ones."""
        return getattr(self.backend, "fourstep", cpu_fourstep)

    def _device_bytes(self) -> int:
        """GPU memory of the resident keys: per key, its arrays' bytes or what the backend holds for
        it, whichever is more (tables of window multiples, ``distprove.msm.precompute``, grow a
        key after it loaded)."""
        if getattr(self.backend, "name", "") != "gpu":
            return 0
        held = getattr(self.backend, "resident_bytes", None)
        return sum(max(k.nbytes, held(h) if held is not None else 0) for h, k in self._keys.items())

    def _evict(self) -> None:
        while len(self._keys) > 1 and (
            len(self._keys) > self.max_keys or (self.gpu_bytes is not None and self._device_bytes() > self.gpu_bytes)
        ):
            h, key = self._keys.popitem(last=False)
            self._vks.pop(h, None)
            self._infos.pop(h, None)
            with self._proofs_lock:
                self._proofs = OrderedDict((t, p) for t, p in self._proofs.items() if p.content_hash != h)
            self._hash_of_path = {p: v for p, v in self._hash_of_path.items() if v != h}
            release = getattr(self.backend, "evict", None)
            if release is not None:
                release(h)
            log.info("evicted key %s (%s)", key.path, h[:12])
        metrics.set_resident_bytes(self._device_bytes())


def state() -> ProverState:
    """This worker's :class:`ProverState` (raises RuntimeError outside a worker or when not registered)."""
    worker = get_worker()
    plugin = worker.plugins.get(PLUGIN_NAME)
    if plugin is None:
        raise RuntimeError(f"the {PLUGIN_NAME!r} worker plugin is not registered on {worker.address}")
    return plugin


def plugin_config(dask_worker: Any) -> list | None:
    """The config of the worker's registered state, or None (run through ``Client.run``)."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return getattr(plugin, "config", None)


# --- task data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProofSpec:
    """One proof to make: where its witness is, which key proves it, where its outputs go."""

    name: str
    witness: str
    key_path: str
    content_hash: str
    proof_path: str
    public_path: str


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


@dataclass
class Prepared:
    """A prepare task's result: the H scalars (when downloaded) or the evaluations a, b, c.

    The witness itself never travels: on the worker that prepared the proof the backend-side
    witness (and H scalars) are kept in its :class:`ProverState` under ``token`` (unique per
    prepare attempt); an MSM task elsewhere reads the witness file again. ``hs`` is None when the
    planner kept the H scalars on the device only (data mode).
    """

    hs: np.ndarray | None
    evals: np.ndarray | None
    seconds: dict[str, float] = field(default_factory=dict)
    token: str = ""
    public: list[int] | None = None
    """The public signals w[1..nPublic] (taken from the witness read here, for the reducer)."""
    live: float = 1.0
    """The witness's share of scalars other than 0 and 1 (window widths of a whole-proof MSM task)."""


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


@dataclass
class Outcome:
    """How one proof ended: ``proved`` (its files exist) or ``failed`` with the reason."""

    name: str
    status: str
    reason: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    worker: str = ""


# --- task bodies -------------------------------------------------------------------------------


def plan_key(path: str, with_vk: bool = False) -> KeyInfo:
    """Open (and keep resident) a key on this worker and describe it for the planner
    (:meth:`ProverState.key_info`: cached while the key stays resident). ``with_vk``: include the
    verification key (checks made off the workers need it; a .zkey's costs a pairing, ~0.4 s,
    on a worker's first use)."""
    st = state()
    info = st.key_info(st.key(path), with_vk)
    return info if info.path == path else replace(info, path=path)  # the same key read from another path


def _prepare_vectors(
    st: ProverState, key: ResidentKey, spec: ProofSpec, local_h: bool
) -> tuple[Any, Any, list[int], dict[str, float], float]:
    """Read and load the witness, gather, and (``local_h``) compute the H scalars: (the backend's
    witness, its H scalars or else the evaluations, the public signals, seconds of witness,
    gather and ntt, the witness's live share for the window widths). A bad witness raises its
    FormatError (counted as a failed proof)."""
    t0 = time.perf_counter()
    be = st.backend
    try:
        loaded = be.load_witness_file(key, spec.witness)
    except FormatError:
        metrics.record_proof(key, False)
        raise
    public = bn254.ints_from_limbs(loaded.values[1 : 1 + key.n_public])  # values checked < r by the load
    live = live_fraction(loaded.values)
    witness = loaded.vector
    del loaded
    t1 = time.perf_counter()
    evals = be.gather(key, witness)
    be.synchronize()
    t2 = time.perf_counter()
    seconds = {"witness": t1 - t0, "gather": t2 - t1}
    if not local_h:
        return witness, evals, public, seconds, live
    hs = be.h_scalars(key, evals)
    del evals
    be.synchronize()
    seconds["ntt"] = time.perf_counter() - t2
    return witness, hs, public, seconds, live


def prepare(spec: ProofSpec, local_h: bool, host_h: bool = True) -> Prepared:
    """Read the witness from its path, gather, and (``local_h``) compute the H scalars here.

    The backend-side witness (and H scalars) stay in this worker's :class:`ProverState` for the
    proof's MSM tasks. ``host_h``: also download the H scalars into the result (split mode, where
    H tasks run on other workers); without it an MSM task elsewhere recomputes them from the
    witness. Without ``local_h`` the evaluations a, b, c are returned as a (3, n, 8) array for
    the distributed four-step NTT. The stage seconds travel with the result (recorded in the
    metrics once per proof, where it ends).
    """
    st = state()
    key = st.key(spec.key_path, spec.content_hash)
    be = st.backend
    witness, vectors, public, seconds, live = _prepare_vectors(st, key, spec, local_h)
    token = uuid.uuid4().hex
    if local_h:
        st.keep_proof(token, key.content_hash, witness, vectors)
        if not host_h:
            return Prepared(None, None, seconds, token, public, live)
        t = time.perf_counter()
        host = be.to_host(vectors)
        seconds["ntt"] += time.perf_counter() - t  # the download, timed with the NTTs as before
        return Prepared(host, None, seconds, token, public, live)
    stacked = np.stack([be.to_host(v) for v in vectors])
    st.keep_proof(token, key.content_hash, witness, None)
    return Prepared(None, stacked, seconds, token, public, live)


def _msm_scalars(st: ProverState, key: ResidentKey, spec: ProofSpec, which: str, source: Prepared | np.ndarray) -> Any:
    """The scalars of MSM ``which`` in the backend's representation: kept on this worker by the
    prepare task when it ran here, else made again (the witness file read and uploaded once and
    kept for the proof's other tasks on this worker; the H scalars as downloaded, or recomputed
    from the witness when the prepare kept them on its device)."""
    be = st.backend
    if which == "H" and not isinstance(source, Prepared):  # from the four-step NTT tasks
        return np.asarray(source).reshape(-1, 8)
    entry = st.proof(source.token)
    if which == "H":
        if entry is not None and entry.hs is not None:
            return entry.hs
        if source.hs is not None:
            return source.hs
    if entry is None:
        entry = st.keep_proof(source.token, key.content_hash, be.load_witness_file(key, spec.witness).vector, None)
    if which != "H":
        return entry.witness
    entry.hs = be.h_scalars(key, be.gather(key, entry.witness))
    return entry.hs


def msm_windows(spec: ProofSpec, which: str, source: Prepared | np.ndarray, c: int, lo: int, hi: int) -> MsmPart:
    """Window sums [lo, hi) of MSM ``which``; ``source`` is the prepare result, or the H scalars."""
    t0 = time.perf_counter()
    st = state()
    key = st.key(spec.key_path, spec.content_hash)
    sums = st.backend.msm_windows(key, which, _msm_scalars(st, key, spec, which, source), c, lo, hi)
    prepared = isinstance(source, Prepared)
    carrier = prepared and which == "A" and lo == 0  # the one part that carries the prepare's results
    upstream = source.seconds if carrier else {}
    token = source.token if prepared else ""
    public = source.public if carrier else None
    return MsmPart(which, c, {lo + i: s for i, s in enumerate(sums)}, time.perf_counter() - t0, dict(upstream), token, public)


def msm_proof(spec: ProofSpec, source: Prepared, widths: Mapping[str, int] | None = None) -> list[MsmPart]:
    """Every window of the proof's five MSMs in one task (data mode), started together as
    :func:`distprove.prover.prove` starts them (the GPU overlaps them) with widths ``widths``
    (None: the backend's choice for this witness, :func:`distprove.prover.witness_widths`).

    One task instead of five saves four task round trips per proof; the parts carry no
    per-MSM seconds (the MSMs overlap), the first carries the prepare's stages and ``msm``.
    """
    from distprove.prover import witness_widths

    st = state()
    key = st.key(spec.key_path, spec.content_hash)
    if widths is None:
        widths = witness_widths(st.backend, key, source.live)
    return _msm_parts(
        st, key, lambda which: _msm_scalars(st, key, spec, which, source), widths, source.seconds, source.token, source.public
    )


def _msm_parts(
    st: ProverState,
    key: ResidentKey,
    scalars: Callable[[str], Any],
    widths: Mapping[str, int],
    upstream: Mapping[str, float],
    token: str,
    public: list[int] | None,
) -> list[MsmPart]:
    """The five MSMs whole, started together (:func:`distprove.prover.start_msms`), as one part
    each; the first carries ``upstream`` seconds with ``msm`` added, and the public signals."""
    from distprove.prover import start_msms

    t0 = time.perf_counter()
    sums = start_msms(st.backend, key, scalars, dict(widths))()
    return _whole_parts(sums, widths, {**upstream, "msm": time.perf_counter() - t0}, token, public)


def _whole_parts(
    sums: Mapping[str, dict[int, bn254.Affine]],
    widths: Mapping[str, int],
    seconds: dict[str, float],
    token: str,
    public: list[int] | None,
) -> list[MsmPart]:
    """Every window of the five MSMs as one part each; the first carries the proof's stage
    ``seconds`` and its public signals."""
    return [
        MsmPart(which, widths[which], sums[which], 0.0, seconds if i == 0 else {}, token, public if i == 0 else None)
        for i, which in enumerate(MSM_NAMES)
    ]


def prove_whole(
    spec: ProofSpec, widths: Mapping[str, int] | None = None, assemble: bool = True,
    blinding: tuple[int, int] | None = None,
) -> Assembled | Collected:
    """A small proof in one task (data mode below ``distprove.planner.fuse-below``): what the
    prepare, msm-windows and reducer tasks do, without their round trips or the proof cache, as
    :func:`distprove.prover.prove` does it (H computed beside the witness MSMs).

    Returns the :class:`Assembled` proof for :func:`verify_write` (``assemble``), else the
    :class:`Collected` window sums for the client's pool. Stage seconds: witness, gather, msm
    (with the NTTs), assemble. ``widths``: fixed window widths, else (None) the backend's
    choice for each witness. ``blinding`` = (r, s) is for tests.
    """
    return _finish_whole(spec, _start_whole(spec, widths)(), assemble, blinding)


def _counting_bad_witness(spec: ProofSpec, step: Callable[[ProverState, ResidentKey], Any]) -> Any:
    """``step(state, key)`` for the spec's resident key; a bad witness (FormatError) is counted as a
    failed proof in the worker's metrics and raised."""
    st = state()
    key = st.key(spec.key_path, spec.content_hash)
    try:
        return step(st, key)
    except FormatError:
        metrics.record_proof(key, False)
        raise


def _start_whole(spec: ProofSpec, widths: Mapping[str, int] | None, witness: Any = None) -> Callable[[], WindowSums]:
    """:func:`prove_whole` up to its MSMs queued on the device; the waiter of their sums.
    ``witness``: the spec's witness already loaded (:func:`_prefetch`), else read here. A bad
    witness raises here (and counts as a failed proof in the worker's metrics)."""
    from distprove.prover import start_window_sums

    source = spec.witness if witness is None else witness
    return _counting_bad_witness(spec, lambda st, key: start_window_sums(key, source, st.backend, widths=widths))


def _prefetch(spec: ProofSpec) -> tuple[ProofSpec, Any]:
    """The spec and its witness loaded into the backend (``prover.prefetch_witness``), for a
    group's next proof while the current one's MSMs run. A bad witness raises here (counted as a
    failed proof)."""
    from distprove.prover import prefetch_witness

    return spec, _counting_bad_witness(spec, lambda st, key: prefetch_witness(key, spec.witness, st.backend))


def _finish_whole(
    spec: ProofSpec, ws: WindowSums, assemble: bool, blinding: tuple[int, int] | None = None
) -> Assembled | Collected:
    """:func:`prove_whole` after its MSMs: the proof assembled here, or its sums collected."""
    parts = _whole_parts(ws.sums, ws.widths, ws.timings, "", ws.public)
    if not assemble:
        return collect_parts(spec, parts)
    key = state().key(spec.key_path, spec.content_hash)
    return assemble_proof(spec, parts, key.points, key.n_public, blinding)


@dataclass
class Failed:
    """A proof of a :func:`prove_group` task that raised (the group's other proofs went on)."""

    spec: ProofSpec
    reason: str


def prove_group(
    specs: Sequence[ProofSpec], widths: Mapping[str, int] | None = None, assemble: bool = True, write: bool = False,
    check: bool = False,
) -> list[Assembled | Collected | Failed] | list[Outcome]:
    """Fused proofs of one key in one task (data mode, see
    :meth:`distprove.graph.Plan.proofs_per_task`): :func:`prove_whole` each (``widths`` as there), pipelined
    (:func:`distprove.prover.pipelined`: while one proof's MSMs run on the device, the host
    assembles the proof before it and loads the next one's witness); a proof that raises becomes
    a :class:`Failed` item with its one-line reason and the next one runs.

    ``write``: the task checks and writes its proofs itself and returns their outcomes, as a
    verify-write task would. Unchecked, each proof is written as it is assembled (beside the next
    proof's MSMs). With ``check``, each proof's own share of the batched pairing check (its
    Miller loop, :class:`distprove.verifier.BatchCheck`) runs as it is assembled, beside the next
    proof's MSMs, and the group is checked with one final exponentiation at its end, before
    anything is written; a proof that fails is not written.
    """
    from distprove.prover import pipelined
    from distprove.verifier import BatchCheck

    def failed(spec: ProofSpec, exc: Exception) -> Failed:  # one bad witness fails alone
        return Failed(spec, one_line(exc))

    proofs = pipelined(specs, lambda ready: _start_whole(ready[0], widths, ready[1]),
                       lambda spec, ws: _finish_whole(spec, ws, assemble), failed, _prefetch)
    if not write:
        return list(proofs)
    if not check:
        return [outcome for item in proofs for outcome in verify_write([item], check=False)]
    st = state()
    batch = BatchCheck()
    items: list[Assembled | Failed] = []
    for item in proofs:
        if isinstance(item, Assembled) and not item.done_before:
            try:
                batch.add(st.vk(st.key(item.spec.key_path, item.spec.content_hash)), item.proof.public, item.proof.points)
            except FormatError as exc:  # this proof fails alone; the batch check goes on without it
                item = failed(item.spec, exc)
        items.append(item)
    return verify_write(items, batch=batch)


@dataclass
class Assembled:
    """A reducer's result: one proof, not yet checked or written."""

    spec: ProofSpec
    proof: Any
    seconds: dict[str, float]
    done_before: bool = False
    """True when an earlier attempt already wrote this proof (nothing was assembled)."""


def assemble_proof(
    spec: ProofSpec,
    parts: Sequence[MsmPart],
    points: Mapping[str, bn254.Affine],
    n_public: int,
    blinding: tuple[int, int] | None = None,
) -> Assembled:
    """Combine the window sums (Horner) and add the blinding: the proof, not yet checked.

    ``points``: the key's alpha1, beta1, beta2, delta1, delta2. The public signals come with
    the parts (taken where the witness was read), else they are read again from the witness
    file (a few values of a memory map). ``blinding`` = (r, s) is for tests.
    """
    from distprove.prover import Proof
    from distprove.stages.assemble import assemble_windows, random_blinding

    t0 = time.perf_counter()
    seconds = part_seconds(parts)
    if os.path.exists(spec.proof_path):  # an earlier run of this proof's tasks already finished the job
        return Assembled(spec, None, seconds, done_before=True)
    sums: dict[str, dict[int, bn254.Affine]] = {w: {} for w in MSM_NAMES}
    widths: dict[str, int] = {}
    for p in parts:
        sums[p.which].update(p.sums)
        widths[p.which] = p.c
    r, s = blinding if blinding is not None else random_blinding()
    pi_a, pi_b, pi_c = assemble_windows(points, sums, widths, r, s)
    public = next((p.public for p in parts if p.public is not None), None)
    if public is None:
        public = public_signals(spec.witness, n_public)
    seconds["assemble"] = time.perf_counter() - t0
    return Assembled(spec, Proof(pi_a, pi_b, pi_c, public), seconds)


def part_seconds(parts: Sequence[MsmPart]) -> dict[str, float]:
    """A proof's stage seconds from its MSM parts: the upstream stages, then msm_X per MSM
    summed over its window ranges (parts of one task for the five MSMs carry ``msm`` instead)."""
    seconds: dict[str, float] = {}
    for p in parts:
        seconds.update(p.upstream)
    for p in parts:
        if p.seconds:
            seconds[f"msm_{p.which}"] = seconds.get(f"msm_{p.which}", 0.0) + p.seconds
    return seconds


def public_signals(path: str, n_public: int) -> list[int]:
    """The public signals w[1..n_public] of the witness file at ``path``: only those values are
    read and checked (< r), not the whole file. Raises FormatError(path, problem)."""
    from distprove.formats.wtns import read_wtns

    values = read_wtns(path, check_values=False).values[1 : 1 + n_public]
    if values.shape[0] != n_public:
        raise FormatError(path, f"witness has {values.shape[0] + 1} values, fewer than the key's 1 + {n_public} public signals")
    bad = first_false(lt_bound(values, bn254.R))
    if bad is not None:
        raise FormatError(path, f"witness value {bad + 1} is >= r (not reduced)")
    return bn254.ints_from_limbs(values)


def flatten(items: Sequence[Any]) -> list[Any]:
    """Task results as a later task receives them, one level of lists undone: a reducer's MSM
    parts (one per msm-windows task in split mode, :func:`msm_proof`'s list of five in data mode),
    verify-write's proofs (one per reducer, a :func:`prove_group` task's list)."""
    out: list[Any] = []
    for it in items:
        out.extend(it if isinstance(it, list) else [it])
    return out


def _drop_resident(parts: Sequence[MsmPart]) -> None:
    """Forget the cached vectors of the prepare results ``parts`` came from, on this worker."""
    state().drop_proofs(sorted({p.token for p in parts if p.token}))


def reduce_assemble(spec: ProofSpec, parts: Sequence[MsmPart | Sequence[MsmPart]], blinding: tuple[int, int] | None = None) -> Assembled:
    """The reducer task: :func:`assemble_proof` with this worker's resident key (for :func:`verify_write`);
    drops the proof's cached vectors on this worker first."""
    parts = flatten(parts)
    _drop_resident(parts)
    key = state().key(spec.key_path, spec.content_hash)
    return assemble_proof(spec, parts, key.points, key.n_public, blinding)


@dataclass
class Collected:
    """A reducer's result when the client assembles: the proof's window sums, gathered."""

    spec: ProofSpec
    parts: list[MsmPart]


def collect_parts(spec: ProofSpec, parts: Sequence[MsmPart | Sequence[MsmPart]]) -> Collected:
    """The reducer task when the client's pool assembles and checks: just the window sums (the
    proof's cached vectors on this worker are dropped). The proof's worker stages are recorded
    in this worker's metrics here (with the checks on the workers, :func:`verify_write` does it)."""
    parts = flatten(parts)
    _drop_resident(parts)
    metrics.record_timings(part_seconds(parts))
    return Collected(spec, list(parts))


NOT_VALID = "does not verify (is the witness satisfying the circuit?); nothing written"


def check_and_write(
    items: Sequence[Assembled], vks: Mapping[str, Any], check: bool, where: str, batch: "BatchCheck | None" = None
) -> list[Outcome]:
    """Check proofs with one batched pairing check (``verify_many``) and write those that pass, once each.

    ``vks`` maps a key's content hash to its parsed verification key (not read without
    ``check``). A proof that fails is reported as failed and never written. Runs wherever it is
    called (a worker, or a process of the client's verification pool); ``where`` names that place
    in the outcomes. ``batch``: the proofs of ``items`` not done before, already added in order
    to this :class:`~distprove.verifier.BatchCheck` (its results are the check; ``vks`` unused).
    """
    from distprove.verifier import verify_many

    t0 = time.perf_counter()
    todo = [a for a in items if not a.done_before]
    if batch is not None:
        if len(batch) != len(todo):
            raise ValueError(f"batch check of {len(batch)} proofs for {len(todo)} to write")
        checked = batch.results()
        t0 -= batch.add_seconds
    elif not check or not todo:
        checked = [True] * len(todo)
    else:  # one proof alone is checked on its own there, reusing its Miller loop
        checked = verify_many([(vks[a.spec.content_hash], a.proof.public, a.proof.points) for a in todo])
    valid = dict(zip((a.spec.name for a in todo), checked))
    share = (time.perf_counter() - t0) / max(1, len(todo))
    out = []
    for a in items:
        seconds = dict(a.seconds)
        if a.done_before:
            out.append(Outcome(a.spec.name, "proved", "written by an earlier attempt", seconds, where))
            continue
        seconds["verify"] = share
        if not valid[a.spec.name]:
            out.append(Outcome(a.spec.name, "failed", NOT_VALID, seconds, where))
            continue
        t1 = time.perf_counter()
        try:
            written = write_once(a.proof.to_json(), a.proof.public_json(), a.spec.proof_path, a.spec.public_path)
        except OSError as exc:  # full disk, permissions: this proof fails, the rest of the group goes on
            reason = f"{a.spec.proof_path}: cannot write: {exc.strerror or exc}; no proof written"
            out.append(Outcome(a.spec.name, "failed", reason, seconds, where))
            continue
        seconds["write"] = time.perf_counter() - t1
        out.append(Outcome(a.spec.name, "proved", "" if written else "written by an earlier attempt", seconds, where))
    return out


def _failed_outcomes(items: Sequence[Any], where: str) -> tuple[list[Any], list[Outcome]]:
    """Split reducer results into the proofs to check and the outcomes of :class:`Failed` items."""
    flat = flatten(items)
    failed = [Outcome(f.spec.name, "failed", f.reason, {}, where) for f in flat if isinstance(f, Failed)]
    return [it for it in flat if not isinstance(it, Failed)], failed


def verify_write(
    items: Sequence[Assembled | list[Assembled | Failed]], check: bool = True, batch: "BatchCheck | None" = None
) -> list[Outcome]:
    """The verify-write task: :func:`check_and_write` on this worker, with its resident keys' vks
    (made only when checking: a .zkey's vk costs a pairing, ~0.4 s, on the first use per worker).
    ``items``: reducer results, a prove-group's list of them, or its :class:`Failed` items;
    ``batch``: their proofs already added to a batch check (:func:`prove_group`)."""
    st = state()
    where = get_worker().address
    items, failed = _failed_outcomes(items, where)
    specs = {a.spec.content_hash: a.spec for a in items if not a.done_before} if check and batch is None else {}
    vks = {h: st.vk(st.key(sp.key_path, h)) for h, sp in specs.items()}
    outcomes = check_and_write(items, vks, check, where, batch)
    by_name = {a.spec.name: a.spec for a in items}
    for o in outcomes:
        if o.reason != "written by an earlier attempt":
            metrics.record_proof(by_name[o.name].key_path, o.status == "proved")
            metrics.record_timings(o.seconds)
    return outcomes + failed


def assemble_check_write_in_process(
    collected: Sequence[Collected | list[Collected | Failed]], keys: Mapping[str, KeyInfo], check: bool
) -> list[Outcome]:
    """In a process of the client's pool: :func:`assemble_proof` then :func:`check_and_write`.

    ``keys`` maps content hash to the :class:`KeyInfo` (points, n_public, vk) of each key.
    """
    from distprove.formats.jsonio import read_vk

    where = f"client pid {os.getpid()}"
    collected, failed = _failed_outcomes(collected, where)
    items = [assemble_proof(c.spec, c.parts, keys[c.spec.content_hash].points, keys[c.spec.content_hash].n_public) for c in collected]
    vks = {h: read_vk(keys[h].vk) for h in {c.spec.content_hash for c in collected}} if check else {}
    return check_and_write(items, vks, check, where) + failed


def warm_up() -> None:
    """Import the assembly and pairing code (run once per process of the client's pool)."""
    import distprove.stages.assemble  # noqa: F401
    import distprove.verifier  # noqa: F401


def check_existing(key_path: str, items: Sequence[tuple[str, str, str]]) -> list[bool]:
    """For each (witness, proof_path, public_path): are the outputs whole, the witness's public
    signals (unchecked when ``witness`` is "": an input batch's witness is gone), and a proof
    that verifies with the key? (one batched pairing check for all)"""
    from distprove.formats.jsonio import read_proof, read_public
    from distprove.verifier import verify_many

    st = state()
    key = st.key(key_path)
    vk = st.vk(key)
    loaded: dict[int, tuple[Any, Any, Any]] = {}
    for i, (witness, proof_path, public_path) in enumerate(items):
        try:
            public = read_public(public_path)
            expected = public_signals(witness, key.n_public) if witness else public
            if public == expected:
                loaded[i] = (vk, public, read_proof(proof_path))
        except (FormatError, OSError):
            continue
    order = sorted(loaded)
    ok = dict(zip(order, verify_many([loaded[i] for i in order]))) if order else {}
    return [ok.get(i, False) for i in range(len(items))]


def write_once(proof_json: dict, public_json: list[str], proof_path: str, public_path: str) -> bool:
    """Write public then proof so that the proof file appears exactly once, whole.

    The public file is deterministic (the witness's public signals), so it is atomically
    replaced; the proof file is hard-linked into place only if no attempt created it first.
    A proof file's existence therefore means its public file is complete. Returns False when
    an earlier attempt had already written the proof.
    """
    if os.path.exists(proof_path):
        return False
    os.makedirs(os.path.dirname(os.path.abspath(public_path)), exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(proof_path)), exist_ok=True)
    write_json_atomic(public_path, public_json)
    return write_json_atomic(proof_path, proof_json, exclusive=True)


# --- four-step NTT tasks (block math in backends/cpu/fourstep.py or the backend's own) ---------


def _ops() -> ModuleType:
    try:
        return state().fourstep()
    except (RuntimeError, ValueError):  # not on a worker with the plugin: the CPU blocks
        return cpu_fourstep


def ntt_columns(source: Prepared | np.ndarray, n: int, lo: int, hi: int, row_ranges: Sequence[tuple[int, int]], inverse: bool) -> tuple[np.ndarray, ...]:
    """Column sub-NTTs and twiddles of columns [lo, hi) of (V, n, 8) vectors (or a prepare's a, b, c),
    cut into the pieces of each row block."""
    ops = _ops()
    values = source.evals if isinstance(source, Prepared) else source
    n1, n2 = ops.split_sizes(n)
    block = ops.column_step(ops.take_columns(values, n1, n2, lo, hi), n, lo, inverse)
    return ops.split_rows(block, row_ranges)


def ntt_rows(pieces: Sequence[np.ndarray], n: int, inverse: bool) -> np.ndarray:
    """Row sub-NTTs of one row block, joined from its pieces of every column block."""
    ops = _ops()
    return ops.row_ntts(ops.join_columns(pieces), n, inverse)


def h_inverse_rows(pieces: Sequence[np.ndarray], n: int, row_lo: int, forward_rows: Sequence[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """H pipeline middle: inverse row sub-NTTs (-> coefficients), odd-coset scaling, then the
    forward transform's column sub-NTTs and twiddles for the same block, cut for the forward rows."""
    ops = _ops()
    coeffs = ops.row_ntts(ops.join_columns(pieces), n, True)
    scaled = ops.coset_scale(coeffs, n, row_lo)
    block = ops.column_step(ops.as_columns(scaled), n, row_lo, False)
    return ops.split_rows(block, forward_rows)


def h_forward_rows(pieces: Sequence[np.ndarray], n: int) -> np.ndarray:
    """H pipeline end: forward row sub-NTTs of a, b, c, then hs = a·b - c for this row block."""
    ops = _ops()
    return ops.h_from_odd(ops.row_ntts(ops.join_columns(pieces), n, False))


def ntt_assemble(blocks: Sequence[np.ndarray]) -> np.ndarray:
    """The (V, n, 8) vectors in natural order from every row block's output."""
    return _ops().natural_order(blocks)
