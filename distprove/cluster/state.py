"""Per-worker state: the ProverState WorkerPlugin, its resident keys and proofs, and the meters.

:class:`ProverState` is registered once per cluster (``Client.register_plugin(state,
name=PLUGIN_NAME)``); its ``setup`` makes the worker's backend (the GPU backend compiles or
loads its kernels there) and it keeps opened keys resident, keyed by content hash, in an LRU
bounded by a count and, on a GPU, by free device memory. It also keeps the backend-side witness
and H scalars of the last few proofs prepared here (:class:`ResidentProof`), so the MSM tasks of
a proof that run on the worker that prepared it upload nothing. Tasks find it with
:func:`state` (``distributed.get_worker().plugins[PLUGIN_NAME]``). The state also keeps each
resident key's planning description (:meth:`ProverState.key_info`) and vk, so a batch of a
resident key plans without recomputing them.

Each task body meters its calls to the prover's stages with distributed's fine performance
metrics (``context_meter``: :data:`STAGES`; :class:`MeteredBackend` for the prover's own
pipeline), so the dashboard's "Fine Performance Metrics" page shows the seconds of each stage
per task prefix and under the batch's span. Outside a task (the client's verification pool,
tests) the meters record nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from concurrent.futures import Executor
from typing import Any

import numpy as np
from distributed import WorkerPlugin, get_worker
from distributed.metrics import context_meter
from dask.system import CPU_COUNT

from distprove import config
from distprove.backends.cpu import fourstep as cpu_fourstep
from distprove.cluster import metrics
from distprove.cluster.tasks import KeyInfo
from distprove.errors import FormatError
from distprove.keyrange import KeyShare, KeyShareView
from distprove.keystore import CSR_ARRAYS, POINT_ARRAYS, open_key

log = logging.getLogger(__name__)

PLUGIN_NAME = "distprove"



STAGES = ("witness", "gather", "ntt", "msm", "assemble", "check", "write")

"""The prover's stages as the dashboard's fine performance metrics name them: reading and loading
the witness, the gather, the NTTs (H scalars), the MSMs (window sums; in a pipelined group the
wait for them), the assembly (Horner and blinding), the pairing check, writing the outputs."""

WITNESS_GEN = "witness-gen"
"""The stage of a batch from inputs before the prover's: computing a witness from its input
(``distprove/witness/pool.py``; the witness task's wait for its worker's witness pool). Not
in :data:`STAGES`, which every batch meters."""
WITNESS_WAIT = "witness-wait"
"""A streamed proof task's wait for each witness its worker's pool is computing
(``distprove.witness.pool.await_witness``): the seconds its proofs were held back by their witnesses."""



DEFAULT_RESIDENT_PROOFS = 4

"""Proofs whose backend-side vectors a worker keeps (``distprove.proof-cache.count`` overrides)."""



class ResidentKey:
    """An opened key, kept per worker; with ``keep_host`` its arrays are read from storage once,
    on first use, and then kept in host memory.

    Duck-types the key of :mod:`distprove.backends.base` (header values, ``points``,
    ``vk_json()`` and the point / CSR arrays). A GPU backend keeps its own device copies, so
    there the arrays are not also kept on the host. In points mode a worker proves over its
    share of the key's points (:meth:`share`) and never reads the whole point arrays.
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

    def share(self, share: KeyShare) -> KeyShareView:
        """The key restricted to one share of its points (points mode), made once per share and
        kept with the key: its ranges are read from the key's storage, never through this
        resident key's whole arrays, and (``keep_host``) kept in host memory."""
        shares = self.__dict__.setdefault("_shares", {})
        view = shares.get(share)
        if view is None:
            view = shares[share] = KeyShareView(self._key, share, keep_host=self._keep_host)
        return view

    def shares(self) -> list[KeyShareView]:
        """The share views made so far (points mode), none otherwise."""
        return list(self.__dict__.get("_shares", {}).values())

    def _held(self, names: Sequence[str]) -> int:
        """Host bytes kept of the whole arrays ``names`` and of every share's ranges."""
        whole = sum(int(v.nbytes) for k, v in self.__dict__.items() if k in names)
        return whole + sum(v.held_bytes for v in self.shares())

    @property
    def held_bytes(self) -> int:
        """Host bytes of this key's arrays read and kept so far: whole arrays and shares' ranges."""
        return self._held((*POINT_ARRAYS, *CSR_ARRAYS))

    @property
    def held_point_bytes(self) -> int:
        """:attr:`held_bytes` of the point arrays only (whole or ranges)."""
        return self._held(POINT_ARRAYS)

    def stored_length(self, name: str) -> int:
        """Rows of array ``name``, from the kept copy or the storage's metadata (nothing read)."""
        kept = self.__dict__.get(name)
        return int((kept if kept is not None else getattr(self._key, name)).shape[0])

    def stored_rows(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi) of array ``name``: from the host copy when one is kept, else read from the
        key's storage without keeping the array (a streamed MSM's chunk)."""
        kept = self.__dict__.get(name)
        return np.asarray((kept if kept is not None else getattr(self._key, name))[lo:hi])

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

    Its setup tunes the worker's host allocator (:mod:`distprove.allocator`,
    ``distprove.cluster.malloc-*``). It also owns the worker's pool for the pre-write check (:meth:`check_executor`), started on
    first use and shut down in :meth:`teardown`; :meth:`check_device` says where the check's
    Miller loop runs.
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
        self._check_pool: Executor | None = None
        self._check_started = False

    def __getstate__(self) -> dict[str, Any]:
        """What travels to the workers on registration: no lock, no kept proofs."""
        st = dict(self.__dict__)
        st["_proofs"], st["_proofs_lock"] = OrderedDict(), None
        st["_check_pool"], st["_check_started"] = None, False
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
        from distprove.allocator import configured, tune_malloc
        from distprove.witness.pool import WITNESS_RESOURCE

        install_task_log_filter()
        tune_malloc(*configured())
        # a witness worker (CPU-only, never given a proof task) opens no device
        witness = worker.state.total_resources.get(WITNESS_RESOURCE, 0) >= 1
        self.backend = get_backend("cpu" if witness else self.backend_name)
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
        if self._check_pool is not None:
            self._check_pool.shutdown(wait=False, cancel_futures=True)
        self._check_pool, self._check_started = None, False

    def check_executor(self) -> Executor | None:
        """The worker's process pool for :class:`distprove.verifier.BatchCheck` (``executor=``):
        ``distprove.check.processes`` processes, or by default half the worker's share of its
        host's cores; started on the first call and kept for the worker's life. None (check in
        the calling thread) when that is 0 or the worker is a daemonic process."""
        with self._proofs_lock:
            if not self._check_started:
                from distprove.verifier import check_pool

                self._check_started = True
                n = check_processes()
                self._check_pool = check_pool(n, shared=False)
                log.info("pre-write check: %s", f"{n} processes" if self._check_pool is not None else "in the proving thread")
            return self._check_pool

    def check_device(self) -> str:
        """Where the pre-write check runs its batch's Miller loop (``BatchCheck(device=...)``): the
        GPU on a GPU backend, else the host."""
        return "gpu" if getattr(self.backend, "name", "") == "gpu" else "cpu"

    def key(self, path: str, content_hash: str | None = None) -> ResidentKey:
        """The resident key read from ``path`` (opened on first use; checked against ``content_hash``)."""
        h = content_hash or self._hash_of_path.get(path)
        if h is not None and h in self._keys:
            self._keys.move_to_end(h)
            return self._keys[h]
        gpu = self.backend.name == "gpu"
        key = ResidentKey(open_key(path, device="auto" if gpu else "cpu"), keep_host=not gpu)
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
        batch of a resident key costs a lookup); ``with_vk`` adds the verification key to it. Its
        ``budget`` is this worker's memory budget now
        (:func:`~distprove.cluster.footprint.worker_budget`: a GPU's free memory changes)."""
        from distprove.cluster.footprint import worker_budget

        info = self._infos.get(key.content_hash)
        budget = worker_budget(self.backend)
        if info is not None and info.budget != budget:
            info = self._infos[key.content_hash] = replace(info, budget=budget)
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
                nbytes=key.nbytes,
                budget=budget,
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
        held: Callable[[str], int] = getattr(self.backend, "resident_bytes", None) or (lambda h: 0)

        def on_device(h: str, k: ResidentKey) -> int:
            shares = k.shares()
            if shares:  # points mode: the shares' ranges, plus whatever the key itself uploaded
                return held(h) + sum(max(v.share_bytes, held(v.content_hash)) for v in shares)
            return max(k.nbytes, held(h))

        return sum(on_device(h, k) for h, k in self._keys.items())

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
                for view in key.shares():
                    release(view.content_hash)
            log.info("evicted key %s (%s)", key.path, h[:12])
        metrics.set_resident_bytes(self._device_bytes())



def check_processes() -> int:
    """``distprove.check.processes``, else half this worker's share of its host's cores (the
    host's cores over the workers on it, as the scheduler lists them), 0 when that share is 1."""
    fixed = config.get_optional_int("check.processes", 0)
    if fixed is not None:
        return fixed
    workers = 1
    try:
        from distributed import get_client
        from distributed.comm.addressing import get_address_host

        host = get_address_host(get_worker().address)
        workers = max(1, sum(get_address_host(a) == host for a in get_client().nthreads()))
    except (ValueError, OSError) as exc:  # not on a worker, or the scheduler is unreachable
        log.info("pre-write check pool sized without the scheduler's worker list: %s", exc)
    share = CPU_COUNT // workers
    return share // 2 if share > 1 else 0


class MeteredBackend:
    """A backend whose stage calls are metered as :data:`STAGES` (``context_meter``), for the
    prover's own pipeline (:func:`distprove.prover.start_window_sums`, ``prefetch_witness``) run
    inside a task: witness loads, the gather, the H scalars (``ntt``), the MSMs (their start,
    which computes them on the CPU, and the wait for their sums: one proof's or a group's, see
    :data:`_STARTS`); a ``synchronize`` counts for the
    stage called last (it waits for that stage's device work). Everything else is the backend's."""

    _STAGE_OF = {
        "load_witness_file": "witness", "load_witness": "witness", "gather": "gather", "h_scalars": "ntt",
        "settle": "ntt", "msm_windows": "msm", "read_witness_file": "witness", "load_witness_group": "witness",
        "gather_group": "gather", "h_scalars_group": "ntt", "msm_chunk_bases": "msm",
    }

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self._last = "gather"

    _STARTS = ("msm_start_all", "msm_start_proofs", "msm_start_combined", "msm_chunk_start")
    """Calls that start MSMs and return a waiter: the start and the wait are both ``msm``."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._backend, name)
        if name in self._STARTS:
            return functools.partial(self._msm_start, attr)
        stage = self._last if name == "synchronize" else self._STAGE_OF.get(name)
        if stage is None or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._last = stage
            with context_meter.meter(stage):
                return attr(*args, **kwargs)

        return call

    def _msm_start(self, start: Callable[..., Callable[[], Any]], *args: Any, **kwargs: Any) -> Callable[[], Any]:
        self._last = "msm"
        with context_meter.meter("msm"):
            wait = start(*args, **kwargs)

        def waited() -> Any:
            with context_meter.meter("msm"):
                return wait()

        return waited



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



def worker_address() -> str:
    """This worker's address (where a task's outcomes say they were made)."""
    return get_worker().address
