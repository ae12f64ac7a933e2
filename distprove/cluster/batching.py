"""``distprove.batch``: prove every witness of a folder on a Dask cluster.

Outputs (``<name>.proof.json`` and ``<name>.public.json``, suffixes from the configuration) are
written by the workers as each proof finishes, exactly once even when a task reruns after a
worker dies, and only after the proof verified. A rerun skips witnesses whose outputs exist and
verify. One bad witness fails alone; the :class:`BatchReport` names it with the reason. Which
witnesses and keys: :mod:`distprove.witness.discovery`.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from dask.system import CPU_COUNT

from distprove.cluster.taskkeys import CHECK_OUTPUTS, PLAN_KEY, PROVE_WHOLE
from distprove import config
from distprove.cluster.tasks import Status, failure_reason
from distprove.errors import FormatError
from distprove.witness.discovery import Job, key_label

if TYPE_CHECKING:
    from distprove.cluster.planner import VerifyGrouping

log = logging.getLogger(__name__)

WITNESS_BOUND = 0.2
"""The share of its proof tasks' time that a batch's proofs waited for their witnesses from which
its report says the witnesses bound it."""


# --- the report ------------------------------------------------------------------------------


@dataclass
class ProofResult:
    """How one witness ended: a :class:`~distprove.cluster.tasks.Status` (failed with the reason)."""

    name: str
    witness: str
    status: Status
    reason: str = ""
    proof_path: str = ""
    public_path: str = ""
    latency: float = 0.0
    """Seconds from the start of the batch until this result arrived."""
    worker: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    """Per-stage seconds of this proof (msm_A ... msm_H summed over window ranges, assemble, check, write)."""


@dataclass(repr=False)
class BatchReport:
    """What a batch did: every witness's result, the wall time and the per-stage worker time."""

    results: list[ProofResult]
    wall_seconds: float
    mode: str = ""
    workers: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    """Compute seconds per task kind over all workers (the dashboard's groups: prove-prepare, msm-windows, ...)."""
    checked: bool = True
    """Whether each proof was checked with a pairing before it was written (``verify``)."""
    witness_workers: int = 0
    """CPU-only workers of the cluster that computed witnesses and proved nothing (``workers``
    counts the provers)."""
    memory: list[str] = field(default_factory=list)
    """Under a configured memory budget, a line per key: its plan on a worker (:func:`memory_lines`)."""

    def _with(self, status: Status) -> list[ProofResult]:
        return [r for r in self.results if r.status == status]

    @property
    def proved(self) -> list[ProofResult]:
        return self._with(Status.PROVED)

    @property
    def failed(self) -> list[ProofResult]:
        return self._with(Status.FAILED)

    @property
    def skipped(self) -> list[ProofResult]:
        return self._with(Status.SKIPPED)

    @property
    def ok(self) -> bool:
        """True when no witness failed."""
        return not self.failed

    @property
    def witness_wait_seconds(self) -> float:
        """Seconds the proofs of a batch from inputs waited, in their proof tasks, for their
        witnesses (0 for witness files)."""
        from distprove.cluster.state import WITNESS_WAIT

        return sum(r.seconds.get(WITNESS_WAIT, 0.0) for r in self.proved)

    @property
    def proofs_per_second(self) -> float:
        """Proofs made per second of wall time (skipped witnesses not counted)."""
        return len(self.proved) / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def summary(self) -> str:
        """A few lines: counts, throughput, stage times, whether the proofs went unchecked, then one
        line per failure (the one place a failure is named)."""
        lines = [
            f"proved {len(self.proved)}, failed {len(self.failed)}, skipped {len(self.skipped)} "
            f"in {self.wall_seconds:.2f} s ({self.proofs_per_second:.2f} proofs/s; mode {self.mode or '-'}, "
            f"{self.workers} workers{f', {self.witness_workers} witness workers' if self.witness_workers else ''})"
        ]
        if self.stage_seconds:
            stages = ", ".join(f"{k} {v:.2f} s" for k, v in sorted(self.stage_seconds.items(), key=lambda kv: -kv[1]))
            lines.append(f"worker time by stage: {stages}")
        waited, proving = self.witness_wait_seconds, self.stage_seconds.get(PROVE_WHOLE, 0.0)
        if proving > 0 and waited >= WITNESS_BOUND * proving:
            lines.append(
                f"witnesses bound this batch: its proof tasks waited {waited:.2f} s of their {proving:.2f} s for them "
                f"(each worker computes them in distprove.witness.processes processes, by default its share of its host's cores)"
            )
        if not self.checked and self.proved:
            lines.append("verify off: no proof was checked before it was written (a witness that does not satisfy "
                         "its circuit gives a proof that does not verify)")
        lines += self.memory
        lines += [f"FAILED {r.name}: {r.reason}" for r in self.failed]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "proved": len(self.proved),
            "failed": len(self.failed),
            "skipped": len(self.skipped),
            "wall_seconds": self.wall_seconds,
            "proofs_per_second": self.proofs_per_second,
            "mode": self.mode,
            "workers": self.workers,
            "witness_workers": self.witness_workers,
            "stage_seconds": self.stage_seconds,
            "checked": self.checked,
            "witness_wait_seconds": self.witness_wait_seconds,
            "memory": self.memory,
            "results": [r.__dict__ for r in self.results],
        }

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"<BatchReport: {self.summary().splitlines()[0]}>"


# --- running -----------------------------------------------------------------------------------


@dataclass
class BatchOptions:
    """Options of :func:`batch` (defaults from the ``distprove`` dask configuration)."""

    scheduler: str | None = None
    backend: str | None = None
    mode: str | None = None
    n_workers: int | None = None
    witness_workers: int = 0
    """CPU-only witness worker processes a local cluster starts beside its provers
    (:func:`distprove.cluster.client.add_witness_workers`)."""
    workers_per_gpu: int | None = None
    """Worker processes per GPU of a local GPU cluster (default: ``distprove.cluster.workers-per-gpu``;
    null there: :func:`distprove.cluster.client.processes_per_gpu` from the batch's keys)."""
    fourstep_min_domain: int | None = None
    windows_per_task: int | None = None
    verify: bool | None = None
    max_keys: int | None = None
    dashboard_address: str | None = "127.0.0.1:8787"
    host: str = "127.0.0.1"
    verify_group: int = 8
    """Proofs checked together by one batched pairing check (at most; fewer when the batch is idle)."""
    verify_wait: float = 1.0
    """Seconds a ready proof may wait for others to share its pairing check."""
    verify_in: str | None = None
    """Where proofs are assembled, checked and written: ``workers`` (reduce-assemble and verify-write
    tasks) or ``client`` (a pool of ``verify_processes`` processes of this process: keeps the
    pure-Python curve and pairing work off the GPU workers' single thread; the client must see
    the witness and output folders). Default: ``distprove.verify-in`` in the dask config, else workers."""
    verify_processes: int | None = None
    """Size of the client's verification pool (default: half the CPU cores)."""
    on_result: Callable[[ProofResult], Any] | None = None
    """Called in the client for each result as it arrives (progress bars, tests)."""
    on_start: Callable[[int], Any] | None = None
    """Called once with the number of witnesses, before any result."""
    echo: Callable[[str], Any] | None = None
    """Where the report's summary is also printed at the end (default: nowhere; the caller holds
    the report, and ``print(report)`` shows the summary)."""
    announce: Callable[[str], Any] | None = print
    """Where the dashboard's address is printed when the batch starts (None: nowhere)."""
    witness_gen: str | None = None
    """An input folder's witness generator: a ``.wasm``, a folder written by ``circom --c`` or the
    binary built from one (default: the one beside the key, a native one before a ``.wasm``:
    :func:`distprove.witness.discovery.generator_beside`)."""
    wasm: str | None = None
    """``witness_gen`` given as a circuit ``.wasm`` (``--wasm``)."""
    keep_witnesses: bool = False
    """Keep each witness computed from an input as ``<name>.wtns`` beside its proof."""

    def __post_init__(self) -> None:
        import dask

        if self.wasm is not None:
            if self.witness_gen is not None and self.witness_gen != self.wasm:
                raise ValueError("wasm and witness_gen name one generator: pass one of them")
            if not os.fspath(self.wasm).endswith(".wasm"):
                raise FormatError(self.wasm, "not a .wasm file; pass a circom --c folder or its binary as the witness generator")
            self.witness_gen = self.wasm

        if self.verify_in is None:
            self.verify_in = dask.config.get("distprove.verify-in", "workers")
        if self.verify_in not in ("workers", "client"):
            raise ValueError(f"verify_in must be 'workers' or 'client', not {self.verify_in!r}")


_POOLS: dict[int, Any] = {}


def verification_pool(processes: int) -> Any:
    """This process's pool for assembling and checking proofs (spawned once, kept for later batches)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from distprove.cluster.client import require_main_guard
    from distprove.cluster.output import warm_up

    pool = _POOLS.get(processes)
    if pool is None or getattr(pool, "_broken", False):
        require_main_guard()  # spawned processes run an unguarded script again
        pool = _POOLS[processes] = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
        for _ in range(processes):  # start every process now, while the cluster proves
            pool.submit(warm_up)
    return pool


def _remove_outputs(job: Job) -> None:
    """Delete a witness's old outputs, proof first (a proof file must imply a complete public file)."""
    for p in (job.proof_path, job.public_path):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def ensure_worker_state(client: Any, backend: str, max_keys: int, gpu_bytes: int | None) -> None:
    """Register the per-worker state plugin unless every worker already runs an equal one."""
    from distprove.cluster.state import PLUGIN_NAME, ProverState, plugin_config

    plugin = ProverState(backend, max_keys, gpu_bytes)
    client.wait_for_workers(1)
    current = client.run(plugin_config)
    if not current or any(list(c or []) != plugin.config for c in current.values()):
        client.register_plugin(plugin, name=PLUGIN_NAME)


def _group(jobs: Iterable[Job]) -> dict[str, list[Job]]:
    out: dict[str, list[Job]] = {}
    for j in jobs:
        out.setdefault(j.key or "", []).append(j)
    return out


def _collect(
    client: Any,
    plan: Any,
    pending: dict[Any, list[tuple[Job, list[Any]]]],
    emit: Callable[..., None],
    grouping: VerifyGrouping,
    pool: Any = None,
    keys: dict[str, Any] | None = None,
    written: set[Any] = frozenset(),
    feed: Any = None,
    counts: Any = None,
) -> None:
    """Gather the proofs as their reducers finish and check-and-write them in groups; the
    futures in ``written`` wrote their proofs themselves and return the outcomes.

    Ready proofs go to a check (one batched pairing check for the group) when ``grouping``
    (:class:`distprove.cluster.planner.VerifyGrouping`) says the group is due. The check is a
    verify-write task on the cluster, or, with ``pool`` (a process pool of the client), the
    fetched window sums are assembled, checked and written there (``keys``: KeyInfo by hash).
    ``feed`` (an :class:`distprove.cluster.inputbatch.InputFeed`) adds proofs while it is active.
    ``counts`` (a :class:`distprove.cluster.progress.ClientProgress`) hears of each group the
    pool wrote (the workers report their own).
    """
    from distributed import as_completed

    from distprove.cluster import graph
    from distprove.cluster.work import assemble_check_write_in_process

    by_name = {job.name: (job, futs) for entries in pending.values() for job, futs in entries}
    computing = len(pending)
    ready: list[Any] = []
    ready_since = 0.0
    checking: dict[Any, list[Any]] = {}
    groups = 0
    stream = as_completed(list(pending))

    def flush() -> None:
        nonlocal groups, ready
        proofs = sum(len(pending[r]) for r in ready)
        if not grouping.due(proofs, computing, time.monotonic() - ready_since, len(checking)):
            return
        if pool is None:
            handle = graph.submit_verify_write(client, ready, plan, groups)
            stream.add(handle)
        else:
            handle = pool.submit(assemble_check_write_in_process, client.gather(ready), keys, plan.verify)
        checking[handle], ready, groups = ready, [], groups + 1

    def finish(job: Job, futures: list[Any], *args: Any) -> None:
        if feed is not None:
            feed.proof_done(job)
        emit(job, *args)
        for f in futures:
            f.release()

    def checked(handle: Any) -> None:
        group = [handle] if handle in written else checking.pop(handle)
        try:
            outcomes = handle.result()
        except Exception as exc:
            for r in group:
                for entry in pending.pop(r):
                    finish(*entry, Status.FAILED, failure_reason(exc))
            return
        for r in group:
            del pending[r]
        if pool is not None and handle not in written and counts is not None:
            counts.pool_group(outcomes)
        for out in outcomes:
            finish(*by_name[out.name], out.status, out.reason, out.worker, out.seconds)

    while not stream.is_empty() or ready or checking or (feed is not None and feed.active):
        if feed is not None:
            for reducer, entries, writes in feed.poll():
                pending[reducer] = entries
                by_name.update((job.name, (job, futs)) for job, futs in entries)
                computing += 1
                stream.add(reducer)
                if writes:
                    written.add(reducer)
        local = [h for h in checking if pool is not None and h.done()]
        for h in local:
            checked(h)
        if not stream.has_ready():
            if not local:
                time.sleep(0.01)
            flush()
            continue
        for fut in stream.next_batch(block=False):
            if fut in checking:
                checked(fut)
                continue
            computing -= 1
            if fut.status in ("lost", "pending"):
                # It finished, then its worker died before we looked: the scheduler runs it again
                # (a task that wrote its proofs finds them written and does not write them twice).
                stream.add(fut)
                computing += 1
            elif fut in written and fut.status == "finished":
                checked(fut)
            elif fut.status == "finished":
                if not ready:
                    ready_since = time.monotonic()
                ready.append(fut)
            else:
                for entry in pending.pop(fut):
                    finish(*entry, Status.FAILED, failure_reason(_exception_of(fut)))
        flush()


def _exception_of(fut: Any) -> BaseException:
    """Why a future did not finish (its exception, or the CancelledError a cancelled one raises)."""
    try:
        return fut.exception()
    except BaseException as exc:  # cancelled futures raise instead of returning
        return exc


def _skip_verified(client: Any, groups: dict[str, list[Job]], tag: str, emit: Callable[..., None],
                   placed: dict[str, Any]) -> set[str]:
    """Check existing outputs on the workers (one batched pairing check per key) and report the
    witnesses whose outputs verify as skipped; delete outputs that do not (they are proved again).
    Returns the names of the witnesses dealt with (skipped, or failed because the check could not run).
    ``placed``: where the checks may run (the provers)."""
    from distprove.witness.discovery import check_witness_path
    from distprove.cluster.output import check_existing

    checks = {}
    for i, (kp, group) in enumerate(groups.items()):  # i: keys of one file name in two folders are two tasks
        have = [j for j in group if os.path.exists(j.proof_path) and os.path.exists(j.public_path)]
        if have:
            items = [(check_witness_path(j), j.proof_path, j.public_path) for j in have]
            checks[kp] = (have, client.submit(check_existing, kp, items, key=(CHECK_OUTPUTS, key_label(kp), i, tag), pure=False, **placed))
    done: set[str] = set()
    for have, fut in checks.values():
        try:
            oks = fut.result()
        except Exception as exc:  # e.g. the key cannot be read: keep the outputs, report why
            for job in have:
                done.add(job.name)
                emit(job, Status.FAILED, failure_reason(exc))
            continue
        for job, ok in zip(have, oks):
            if ok:
                done.add(job.name)
                emit(job, Status.SKIPPED, "outputs exist and verify")
            else:
                _remove_outputs(job)
    return done


def _plan_keys(
    client: Any, groups: dict[str, list[Job]], done: set[str], tag: str, emit: Callable[..., None], with_vk: bool,
    placed: dict[str, Any],
) -> list[tuple[Job, Any]]:
    """Open each key on a worker of ``placed`` (KeyInfo: sizes, window widths, ..., the verification key when
    ``with_vk``); the jobs of a key that cannot be opened fail with the reason. Returns (job,
    KeyInfo) for every job left to prove."""
    from distprove.cluster.work import plan_key

    infos = {kp: client.submit(plan_key, kp, with_vk, key=(PLAN_KEY, key_label(kp), i, tag), pure=False, **placed)
             for i, kp in enumerate(groups)}  # i: keys of one file name in two folders are two tasks
    planned: list[tuple[Job, Any]] = []
    for kp, group in groups.items():
        left = [j for j in group if j.name not in done]
        try:
            info = infos[kp].result()
        except Exception as exc:
            for job in left:
                emit(job, Status.FAILED, failure_reason(exc))
            continue
        planned += [(j, info) for j in left]
    return planned


def run_jobs(client: Any, jobs: list[Job], opts: BatchOptions) -> BatchReport:
    """Prove ``jobs`` on ``client``'s cluster (the worker state must be registered)."""
    from dask.utils import key_split
    from distributed import get_task_stream, span

    from distprove.cluster import dashboard, graph, planner
    from distprove.cluster.inputbatch import InputFeed, witness_source
    from distprove.cluster.progress import ClientProgress
    from distprove.witness.discovery import InputJob, witness_file
    from distprove.witness.pool import witness_workers
    from distprove.cluster.tasks import ProofSpec

    settings = config.settings()
    t0 = time.perf_counter()
    tag = uuid.uuid4().hex[:8]
    results: list[ProofResult] = []
    witness = witness_workers(client)
    feed = InputFeed(witness=witness) if any(isinstance(j, InputJob) for j in jobs) else None
    shared = feed.shared if feed is not None else 0  # what its streamed proof tasks' sources carry

    def emit(job: Job, status: Status, reason: str = "", worker: str = "", seconds: dict[str, float] | None = None) -> None:
        res = ProofResult(
            job.name, job.witness, status, reason, job.proof_path, job.public_path, time.perf_counter() - t0, worker, seconds or {}
        )
        results.append(res)
        counts.result(status)
        if feed is not None:
            feed.finished(job)
        log.info("%s: %s %s", job.name, status, reason)
        if opts.on_result is not None:
            opts.on_result(res)

    dashboard.register(client)
    link = dashboard.dashboard_link(client)
    if link and opts.announce is not None:
        opts.announce(f"dashboard: {link}")
    if opts.on_start is not None:
        opts.on_start(len(jobs))
    workers = tuple(sorted(set(client.nthreads()) - set(witness)))  # the provers
    if not workers:
        raise FormatError("the cluster", "has only witness workers: no worker to prove on")
    placed = {"workers": list(workers), "allow_other_workers": False} if witness else {}
    if witness:  # proof tasks held to the provers follow a prover restarted or added
        from distprove.cluster.provers import follow_provers

        follow_provers(client)
    mode = ""
    memory: list[str] = []
    # counts: the scheduler's tally of this batch (the distprove page, the distprove_batch_* metrics)
    with get_task_stream(client) as stream, span("distprove-batch"), ClientProgress(client, tag, len(jobs)) as counts:
        todo = []
        for job in jobs:
            if job.error:
                emit(job, Status.FAILED, f"{job.witness}: {job.error}")
            else:
                todo.append(job)
        groups = _group(todo)
        done = _skip_verified(client, groups, tag, emit, placed)
        check = settings.verify if opts.verify is None else opts.verify
        planned = _plan_keys(client, groups, done, tag, emit, with_vk=check and opts.verify_in == "client", placed=placed)
        if planned:
            plan = planner.plan_batch(
                settings,
                [info for _, info in planned],
                workers,
                tag,
                mode=opts.mode,
                fourstep_min_domain=opts.fourstep_min_domain,
                windows_per_task=opts.windows_per_task,
                verify=check,
                assemble_on_workers=opts.verify_in == "workers",
                provers_only=bool(witness),
            )
            mode = plan.mode
            memory = memory_lines([info for _, info in planned], plan.budget, settings.worker_memory)
            pending: dict[Any, list[tuple[Job, list[Any]]]] = {}
            written: set[Any] = set()  # fused tasks that wrote their proofs (results: outcomes)

            def submit(chunk: list[Job], info: Any, i: int, worker: str | None = None, stream: bool = False,
                       witnesses: Any = None) -> tuple[Any, list[Any], bool]:
                """One group of proofs of a key; ``i``: the planned index of its first proof (its
                priority and split-mode placement). ``stream``: an input group whose task waits for its
                witnesses, on ``worker`` (fused keys), or takes the values of the witness task
                ``witnesses``. Returns (reducer, futures, writes its proofs)."""
                for folder in {os.path.dirname(j.proof_path) for j in chunk}:
                    os.makedirs(folder, exist_ok=True)
                specs = [ProofSpec(j.name, witness_file(j), info.path, info.content_hash, j.proof_path, j.public_path,
                                   witness_source(j, tag, shared) if stream else None) for j in chunk]
                writes = False
                if plan.fuses(info):
                    reducer = graph.submit_group(client, specs, info, plan, priority=len(planned) - i, worker=worker,
                                                 witnesses=witnesses)
                    futures, writes = [reducer], plan.writes_in_task
                else:
                    reducer, futures = graph.submit_proof(client, specs[0], info, plan, i, priority=len(planned) - i)
                return reducer, futures, writes

            if feed is not None:  # inputs: proofs are submitted as their witnesses arrive
                feed.start(client, planned, plan, submit, emit, tag)
            else:
                for chunk, info, i in planner.task_groups(plan, planned):  # _plan_keys keeps a key's jobs together
                    reducer, futures, writes = submit(chunk, info, i)
                    if writes:
                        written.add(reducer)
                    pending[reducer] = [(j, futures) for j in chunk]
            if opts.verify_in == "client":
                procs = opts.verify_processes or max(1, CPU_COUNT // 2)
                keys = {info.content_hash: info for _, info in planned}
                pool = verification_pool(procs)
                grouping = planner.VerifyGrouping.for_batch(plan, opts.verify_group, opts.verify_wait, procs)
                _collect(client, plan, pending, emit, grouping, pool, keys, written, feed, counts)
            else:
                grouping = planner.VerifyGrouping.for_batch(plan, opts.verify_group, opts.verify_wait)
                _collect(client, plan, pending, emit, grouping, written=written, feed=feed)
            if feed is not None:
                feed.close()
    stage_seconds: dict[str, float] = {}
    for rec in stream.data:
        for ss in rec.get("startstops", ()):
            if ss.get("action") == "compute":
                k = key_split(rec["key"])
                stage_seconds[k] = stage_seconds.get(k, 0.0) + ss["stop"] - ss["start"]
    order = {j.name: i for i, j in enumerate(jobs)}
    results.sort(key=lambda r: order[r.name])
    return BatchReport(results, time.perf_counter() - t0, mode, len(workers), stage_seconds, check, len(witness), memory)


def memory_lines(infos: Iterable[Any], budget: int | None, worker_memory: int | None) -> list[str]:
    """A line per key (``KeyInfo``) with its memory plan on a worker
    (:func:`distprove.memplan.plan_memory` at the key's group size, ``distprove.msm.group-proofs``
    or 1) when a budget is configured: ``distprove.gpu.memory-limit`` for a GPU key (the budget
    its workers reported, ``budget``), ``distprove.planner.worker-memory`` for a CPU key. None
    configured: no line (every stage on its unbounded path)."""
    from distprove.backends.cpu import CpuBackend
    from distprove.cluster.footprint import point_bytes
    from distprove.memplan import GPU_OVERHEAD, MIN_CHUNK, KeyDims, MemoryBudgetError, plan_memory

    lines = []
    for info in {info.content_hash: info for info in infos}.values():
        gpu = info.backend == "gpu"
        limit = (budget if config.gpu_memory_limit() is not None else None) if gpu else worker_memory
        if limit is None:
            continue
        csr = max(0, info.nbytes - point_bytes(info.n_vars, info.n_public, info.domain_size))
        dims = KeyDims(info.n_vars, info.n_public, info.domain_size, csr)
        try:
            text = plan_memory(dims, limit, config.group_proofs() or 1, in_flight=config.groups_in_flight(),
                               overhead=GPU_OVERHEAD if gpu else 0,
                               min_chunk=MIN_CHUNK if gpu else CpuBackend.min_chunk).brief()
        except MemoryBudgetError as exc:
            text = str(exc)
        lines.append(f"memory plan of {info.path} per worker: {text}")
    return lines


def batch(
    witness_dir: str | os.PathLike[str],
    key: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    client: Any = None,
    **options: Any,
) -> BatchReport:
    """Prove every ``*.wtns`` under ``witness_dir`` (or, for a folder of ``*.json`` inputs,
    compute their witnesses on the workers first: :mod:`distprove.cluster.inputbatch`); return a
    :class:`BatchReport` (``print(report)`` shows its summary).

    ``key``: a key store or ``.zkey`` for all witnesses (default: ``distprove.key``, else the key
    beside the witnesses: in a witness's folder, up to ``witness_dir`` and its parent).
    ``out_dir``: default ``<witness_dir>/proofs``. ``client``: a ``distributed.Client`` (default:
    ``scheduler=`` / ``DASK_SCHEDULER_ADDRESS``, else a local cluster, whose worker processes
    run a calling script again: a script needs ``if __name__ == "__main__":`` around the call). ``options`` (see :class:`BatchOptions`): scheduler, backend (auto|cpu|gpu),
    mode (auto|data|split), n_workers, witness_workers, workers_per_gpu, fourstep_min_domain, windows_per_task, verify, max_keys,
    verify_group, verify_wait, verify_in (workers|client), verify_processes, dashboard_address, host,
    on_result, on_start, echo, announce (the dashboard's link when the batch starts), witness_gen
    (or wasm, for a .wasm), keep_witnesses.
    """
    from distprove.cluster.client import connect
    from distprove.cluster.inputbatch import ensure_witness_pool
    from distprove.witness.discovery import discover_any

    opts = BatchOptions(**options)
    settings = config.settings()
    jobs = discover_any(witness_dir, key, out_dir, opts.witness_gen, opts.keep_witnesses)
    backend = opts.backend or settings.backend
    with connect(
        client,
        scheduler=opts.scheduler,
        backend=backend,
        n_workers=opts.n_workers,
        witness_workers=opts.witness_workers,
        workers_per_gpu=opts.workers_per_gpu,
        host=opts.host,
        dashboard_address=opts.dashboard_address,
        keys=[job.key for job in jobs],
    ) as c:
        ensure_worker_state(c, backend, opts.max_keys or settings.key_cache_count, settings.key_cache_gpu_bytes)
        ensure_witness_pool(c, jobs)
        report = run_jobs(c, jobs, opts)
    if opts.echo is not None:
        opts.echo(report.summary())
    return report
