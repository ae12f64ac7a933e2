"""The batch planner: how a batch is laid out on the cluster, decided in one place.

:mod:`distprove.cluster.batching` asks it which mode a batch runs in (:func:`plan_batch`,
:func:`choose_mode`), how a key's proofs are cut into tasks and in what order they are submitted
(:func:`task_groups`, :meth:`Plan.proofs_per_task`) and when ready proofs are checked together
(:class:`VerifyGrouping`); :mod:`distprove.cluster.graph` asks the :class:`Plan` how to build one
proof's tasks (:meth:`Plan.fuses`, :meth:`Plan.window_ranges`, :meth:`Plan.uses_fourstep`,
:meth:`Plan.hands_h_over`). Nothing here submits a task.

Modes: ``data`` proves whole proofs per worker (one task for the five MSMs, started together as
in :func:`distprove.prover.prove`; placement left to the scheduler's locality; best throughput
when proofs >= workers). A key whose domain is below ``fuse_below``
(``distprove.planner.fuse-below``, default 2^23; null: never) is proved in data mode by
prove-whole tasks running the in-process prover's pipeline (H beside the witness MSMs): a Dask
task costs milliseconds around its body, which a proof of a few tens of milliseconds cannot hide
three times over; small keys' proofs go several to a task (:meth:`Plan.proofs_per_task`), and the
task checks (one batched pairing check per group) and writes its proofs itself, streaming them
out group by group (:attr:`Plan.writes_in_task`). ``split`` cuts every MSM into ranges of ``windows_per_task``
windows pinned round-robin (loosely, so a lost worker's share moves on) to the workers and, for
domains of at least ``fourstep_min_domain`` (CPU keys 2^16 by default, GPU keys only when it is
given), computes H with the four-step NTT on all workers (meant for the latency of a few large
proofs). ``points`` is for a key larger than one worker: each of the N workers holds a
contiguous range of every MSM's base points (:meth:`Plan.key_shares`, about 1/N of the key's
point bytes each) and computes every proof's five partial MSMs over it in one task; the proof's
prepare (witness, gather, H) runs once on one worker and hands the witness and H scalars to the
range tasks; the reducer adds the partial points. ``auto`` picks it when the key's resident
footprint (:mod:`distprove.cluster.footprint`) exceeds a worker's memory budget. All give valid
proofs of the same points (up to the blinding).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from distprove.choices import PLANNER_MODES as MODES
from distprove.cluster.footprint import resident_footprint
from distprove.cluster.tasks import KeyInfo
from distprove.keyrange import DEFAULT_ALIGN, KeyShare, key_shares

if TYPE_CHECKING:
    from distprove.config import Settings

DEFAULT_FOURSTEP_MIN_DOMAIN = 1 << 16
GROUP_DOMAIN = 1 << 23
"""The default of ``distprove.planner.group-domain``: a prove-whole task of several proofs holds at
most this many domain points in all (eight proofs at 2^20, ~0.3 s of an H200). Each task loses
about one proof's host tail (its assembly and write with the device idle) plus the task's round
trip, ~7-12 ms, so larger groups pay less of it: at 2^20 on one H200, groups of 8 keep the worker
at 0.92-0.93 of the pipelined bare loop, groups of 4 at 0.89-0.91."""
TASKS_PER_WORKER = 8
"""Grouped proofs leave at least this many tasks per worker, for the scheduler to balance."""
CHECKED_GROUP_DOMAIN = 1 << 24
CHECKED_TASKS_PER_WORKER = 4
"""The same limits for tasks that check their proofs: a checked task's end also pays its last
group's batched check (the device step, G1 sums, the Miller product and one final
exponentiation) with the device idle, so tasks go larger. In groups of four at 2^20 a checked
batch ran at 13.0 proofs/s against 15.8 unchecked (1 x H200); in groups of 16, 14.9."""


@dataclass(frozen=True)
class Plan:
    """How a batch is laid out: the mode, the workers (addresses) and the four-step threshold."""

    mode: str
    workers: tuple[str, ...]
    fourstep_min_domain: int | None = None
    """Split mode computes H as four-step blocks across the workers for domains of at least this
    size. None: CPU keys from :data:`DEFAULT_FOURSTEP_MIN_DOMAIN`, GPU keys never (one GPU
    computes H in milliseconds; the blocks cross workers through Dask as host arrays)."""
    windows_per_task: int = 4
    verify: bool = True
    tag: str = ""
    assemble_on_workers: bool = True
    """False when the client's process pool assembles, checks and writes (``verify_in="client"``)."""
    fuse_below: int | None = None
    """Data mode proves a key whose domain size is below this in one task per proof (None: never)."""
    max_proofs_per_task: int = 1
    """Data mode: up to this many proofs of a fused key in one prove-whole task (see :meth:`proofs_per_task`)."""
    max_proofs_per_writing_task: int | None = None
    """... in one that checks and writes its proofs itself (:attr:`writes_in_task`); None:
    :attr:`max_proofs_per_task`."""
    group_domain: int = GROUP_DOMAIN
    """Data mode: an unchecked group of fused proofs holds at most this many domain points."""
    provers_only: bool = False
    """The cluster also has witness workers (:data:`~distprove.witness.pool.WITNESS_RESOURCE`):
    every task of a proof is held to :attr:`workers`, the provers (see :meth:`place`)."""
    budget: int | None = None
    """A worker's memory budget the mode was chosen against (bytes; None: unbounded)."""
    footprint: int = 0
    """The largest key's resident footprint the mode was chosen with (bytes)."""

    def place(self, worker: str | None = None) -> dict[str, Any]:
        """Where a proof's task may run (``Client.submit`` keywords): preferably on ``worker``
        (loosely: another one when it is gone), else anywhere. In a cluster with witness workers
        (:attr:`provers_only`): on any prover, strictly, ``worker`` left to the scheduler's
        choice among them; a loose preference would let a task whose prover died go to a
        witness worker."""
        if self.provers_only:
            return {"workers": list(self.workers), "allow_other_workers": False}
        return {"workers": [worker], "allow_other_workers": True} if worker is not None else {}

    def fuses(self, info: KeyInfo) -> bool:
        """Whether a proof of this key is one prove-whole task."""
        return self.mode == "data" and self.fuse_below is not None and info.domain_size < self.fuse_below

    @property
    def writes_in_task(self) -> bool:
        """Whether a prove-whole task checks (``verify``) and writes its proofs itself: whenever the
        proofs are assembled on the workers. A separate verify-write task per group held the GPU
        idle for the group's whole check (9 ms of worker time per proof on 2 x H200 only to
        write files); in the task, each group's check and group write run in the task's finisher
        thread beside the next groups' MSMs (work.prove_group)."""
        return self.assemble_on_workers

    def proofs_per_task(self, info: KeyInfo, n_proofs: int) -> int:
        """How many of the batch's ``n_proofs`` proofs of this key one prove-whole task proves.

        A Dask task costs ~2 ms of worker time around its body (measured on 2 x H200), and a
        task's proofs are pipelined (one group's host work beside the next group's device work)
        except at its ends, so every task boundary costs about one group's host work with the
        device idle; grouping pays it once per task. Tasks stay below :attr:`group_domain` domain
        points (but hold two proofs of a larger key), at most ``max_proofs_per_task``, and small
        enough that every worker gets :data:`TASKS_PER_WORKER` tasks to balance (the last task of
        a worker is the batch's tail). A task that writes its proofs (:attr:`writes_in_task`)
        streams them out group by group (:func:`distprove.cluster.work.prove_group`: memory bounded
        by groups, not by the task), so it takes up to ``max_proofs_per_writing_task`` instead;
        one that also checks them (``verify``) uses :data:`CHECKED_GROUP_DOMAIN` and
        :data:`CHECKED_TASKS_PER_WORKER`. With the defaults, checked: at 2^12 tasks of 1024
        proofs (the cap), at 2^16 256 (the domain), at 2^20 16, fewer where the balance needs."""
        if not self.fuses(info):
            return 1
        checked = self.verify and self.writes_in_task
        domain = CHECKED_GROUP_DOMAIN if checked else self.group_domain
        tasks = CHECKED_TASKS_PER_WORKER if checked else TASKS_PER_WORKER
        cap = self.max_proofs_per_task
        if self.writes_in_task and self.max_proofs_per_writing_task is not None:
            cap = self.max_proofs_per_writing_task
        balance = n_proofs // (tasks * max(1, len(self.workers)))
        return max(1, min(cap, max(2, domain // info.domain_size), balance))

    def window_ranges(self, w_count: int) -> list[tuple[int, int]]:
        """The MSM window ranges of one task each in split mode: ``windows_per_task`` windows
        (data mode runs all five MSMs whole in one task)."""
        step = max(1, self.windows_per_task)
        return [(lo, min(lo + step, w_count)) for lo in range(0, w_count, step)]

    def hands_h_over(self, info: KeyInfo) -> bool:
        """Whether the prepare downloads the H scalars into its result for H tasks on other
        workers: split mode pins H tasks elsewhere (see :func:`split_hands_h_over`); points mode
        always (a range worker holds no coefficients to recompute them)."""
        return self.mode == "points" or (self.mode == "split" and split_hands_h_over(info.backend))

    def key_shares(self, info: KeyInfo) -> list[KeyShare]:
        """Points mode: each worker's share of the key's points, share i for :attr:`workers` [i]
        (:func:`distprove.keyrange.key_shares`)."""
        return key_shares(info.n_vars, info.n_public, info.domain_size, max(1, len(self.workers)), DEFAULT_ALIGN)

    def uses_fourstep(self, info: KeyInfo) -> bool:
        """Whether H for this key runs as four-step blocks across workers."""
        threshold = self.fourstep_min_domain
        if threshold is None and info.backend == "cpu":
            threshold = DEFAULT_FOURSTEP_MIN_DOMAIN
        return (
            threshold is not None
            and self.mode == "split"
            and len(self.workers) > 1
            and info.domain_size >= max(4, threshold)
            and (info.backend == "cpu" or info.native_fourstep)
        )


def split_hands_h_over(backend: str) -> bool:
    """Whether split mode hands a key's H scalars to H tasks on other workers (downloaded by the
    prepare, through Dask) rather than those workers recomputing them: only for CPU keys. A GPU
    worker recomputes H from the witness it reads anyway for its other tasks (gather and NTT, ~37
    ms at 2^24 on an H200), where 512 MB through Dask took ~0.17 s (the ~3 GB/s at which the
    scaling model matches the measured 2-GPU split latency)."""
    return backend == "cpu"


def choose_mode(
    mode: str, n_proofs: int, n_workers: int, max_domain: int, split_min_domain: int | None, split_max_proofs_per_worker: int,
    footprint: int = 0, budget: int | None = None,
) -> str:
    """The batch's mode; ``auto`` is ``points`` when the largest key's resident ``footprint``
    (:func:`key_footprint`) exceeds a worker's ``budget`` (None: unbounded) and there are
    several workers to share it; else ``split`` when the largest key's domain is at least
    ``split_min_domain`` (None: never) and there are fewer than ``split_max_proofs_per_worker``
    proofs per worker (a few large proofs: latency), else ``data`` (``distprove.planner`` in the
    configuration: ``split-min-domain`` for CPU workers, ``gpu-split-min-domain`` for GPU ones)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (choose one of {', '.join(MODES)})")
    if mode != "auto":
        return mode
    if n_workers > 1 and budget is not None and footprint > budget:
        return "points"
    if (n_workers > 1 and split_min_domain is not None and max_domain >= split_min_domain
            and n_proofs < split_max_proofs_per_worker * n_workers):
        return "split"
    return "data"


def plan_batch(
    settings: Settings,
    infos: Sequence[KeyInfo],
    workers: tuple[str, ...],
    tag: str,
    *,
    mode: str | None = None,
    fourstep_min_domain: int | None = None,
    windows_per_task: int | None = None,
    verify: bool = True,
    assemble_on_workers: bool = True,
    provers_only: bool = False,
) -> Plan:
    """The :class:`Plan` of a batch whose proofs have the keys ``infos`` (one per proof, in the
    planned order, at least one) on ``workers`` (the provers; ``provers_only``: the cluster also
    has witness workers): the batch's options, else (None) the
    ``distprove.planner`` values of ``settings``; the split threshold is the GPU one when the
    first proof's key is a GPU key. ``auto`` compares the largest key's footprint
    (:func:`key_footprint`) with :func:`batch_budget` (a CPU batch also honours the client's
    ``distprove.planner.worker-memory``)."""
    gpu = infos[0].backend == "gpu"
    budget = batch_budget(infos, None if gpu else settings.worker_memory)
    footprint = max(key_footprint(info) for info in infos)
    chosen = choose_mode(
        mode or settings.planner_mode,
        len(infos),
        len(workers),
        max(info.domain_size for info in infos),
        settings.gpu_split_min_domain if gpu else settings.split_min_domain,
        settings.split_max_proofs_per_worker,
        footprint,
        budget,
    )
    return Plan(
        chosen,
        workers,
        fourstep_min_domain,
        windows_per_task or settings.windows_per_task,
        verify,
        tag,
        assemble_on_workers=assemble_on_workers,
        fuse_below=settings.fuse_below,
        max_proofs_per_task=settings.proofs_per_task,
        max_proofs_per_writing_task=settings.proofs_per_writing_task,
        group_domain=settings.group_domain,
        provers_only=provers_only,
        budget=budget,
        footprint=footprint,
    )


def key_footprint(info: KeyInfo) -> int:
    """A key's resident footprint on one worker proving it whole
    (:func:`distprove.cluster.footprint.resident_footprint`: its arrays plus MSM scratch)."""
    return resident_footprint(info.n_vars, info.n_public, info.domain_size, info.nbytes)


def batch_budget(infos: Sequence[KeyInfo], configured: int | None = None) -> int | None:
    """A worker's memory budget for the batch: the smallest of the budgets the workers that
    opened its keys reported (``KeyInfo.budget``) and ``configured`` (a CPU batch: the client's
    ``distprove.planner.worker-memory``); None when none is set."""
    known = [info.budget for info in infos if info.budget is not None]
    if configured is not None:
        known.append(configured)
    return min(known) if known else None


class _Keyed(Protocol):
    """A batch job: its key's path groups it (``discovery.Job``, ``inputbatch.InputJob``)."""

    @property
    def key(self) -> str | None: ...


J = TypeVar("J", bound=_Keyed)


def task_groups(plan: Plan, planned: Sequence[tuple[J, KeyInfo]]) -> Iterator[tuple[list[J], KeyInfo, int]]:
    """The proof groups of a batch in the order they are submitted: (jobs, their key, the planned
    index of the first job). ``planned`` keeps each key's jobs together; each key's run is cut, in
    order, into groups of :meth:`Plan.proofs_per_task` of that key's proof count (the last one
    shorter), one task each when the key fuses, else one proof each."""
    i = 0
    for _, same_key in groupby(planned, key=lambda ji: ji[0].key):
        key_jobs = [j for j, _ in same_key]
        info = planned[i][1]
        size = plan.proofs_per_task(info, len(key_jobs))
        for k in range(0, len(key_jobs), size):
            chunk = key_jobs[k : k + size]
            yield chunk, info, i
            i += len(chunk)


@dataclass(frozen=True)
class VerifyGrouping:
    """When proofs that are ready (reducers done, not checked in their task) are checked: together,
    by one batched pairing check per group, with at most ``slots`` checks running at once."""

    size: int
    """A group is due once it holds this many proofs (``BatchOptions.verify_group``)."""
    wait: float
    """... or once its oldest proof has waited this many seconds (``BatchOptions.verify_wait``) ..."""
    slots: int
    """Checks in flight at once: the client pool's processes, else one per worker."""

    @classmethod
    def for_batch(cls, plan: Plan, size: int, wait: float, pool_processes: int | None = None) -> VerifyGrouping:
        """The grouping of a batch: one slot per process of the client's pool when it checks
        (``pool_processes``), else one per worker (verify-write tasks)."""
        return cls(size, wait, pool_processes if pool_processes is not None else max(1, len(plan.workers)))

    def due(self, ready: int, computing: int, waited: float, checking: int) -> bool:
        """Whether the ``ready`` proofs (the oldest ready for ``waited`` seconds) are checked now,
        with ``computing`` groups still being proved and ``checking`` checks running: when a slot
        is free and the group is full, has waited long enough, or nothing else is coming (a lone
        proof is checked at once; a busy batch pays the cheaper batched check)."""
        return ready > 0 and checking < self.slots and (ready >= self.size or computing == 0 or waited >= self.wait)
