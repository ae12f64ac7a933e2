"""The Dask task graph of a batch: per proof a prepare task, MSM window-range tasks and a reducer,
or for a small proof one task that does all three.

Everything is submitted with :meth:`distributed.Client.submit` under explicit tuple keys, so the
dashboard groups tasks by stage (``dask.utils.key_split``)::

    ("prove-whole", name, tag)                      data mode, domain below ``fuse_below``: the
                                                    three tasks below in one (their task bodies,
                                                    called in turn on one worker); ("prove-whole",
                                                    "name+k", tag) proves name and the k proofs
                                                    after it (``Plan.proofs_per_task``)
    ("prove-prepare", name, tag)                    read the witness on the worker, gather, H
    ("msm-windows", name, msm, first_window, tag)   window sums of one MSM's window range (data
                                                    mode: msm "all", the five MSMs whole in one task)
    ("reduce-assemble", name, tag)                  Horner combine and blinding: the proof
                                                    (("reduce-collect", ...) gathers the window sums
                                                    instead when the client's pool assembles)
    ("verify-write", group, tag)                    one batched pairing check of the proofs that
                                                    are ready, then each valid one written once
    ("ntt-columns" | "ntt-transpose" | "ntt-rows-inverse" | "ntt-rows-forward" | "ntt-collect", ...)
                                                    the four-step H computation across workers
    ("proofs", name, tag)                           one per proof, done when its proof is (see
                                                    :func:`submit_markers`): the dashboard's
                                                    progress bar of the batch, in proofs

(dask's ``key_split`` drops an 8-letter word starting with a-f as if it were a hex token, so
the dashboard shows the reducer group as ``reduce``.) ``tag`` is unique per batch so that reruns
in one client never reuse a finished key. Results stay
on the workers (witness, scalars and evaluations move worker to worker at most); keys never travel:
tasks carry the key's path and content hash and workers keep it resident (:mod:`distprove.dist.state`).
A worker also keeps the device-side witness and H scalars of the proofs it prepared, so MSM
tasks that run where their prepare ran upload nothing; the reducer drops them.

Planner modes: ``data`` proves whole proofs per worker (one task for the five MSMs, started
together as in :func:`distprove.prover.prove`; placement left to the scheduler's locality; best
throughput when proofs >= workers). A key whose domain is below ``fuse_below``
(``distprove.planner.fuse-below``, default 2^23; null: never) is proved in data mode by
prove-whole tasks running the in-process prover's pipeline (H beside the witness MSMs): a Dask
task costs milliseconds around its body, which a proof of a few tens of milliseconds cannot hide
three times over; small keys' proofs go several to a task (``Plan.proofs_per_task``), and the task
checks (one batched pairing check per group) and writes its proofs itself (``Plan.writes_in_task``). ``split`` cuts every MSM into
ranges of ``windows_per_task`` windows pinned round-robin (loosely, so a lost worker's share
moves on) to the workers and, for domains of at least ``fourstep_min_domain`` (CPU keys 2^16 by
default, GPU keys only when it is given), computes H with the four-step NTT on all workers (meant
for the latency of a few large proofs). Both give valid
proofs of the same points (up to the blinding).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distributed import Client, Future

from distprove.groth16 import MSM_NAMES
from distprove.backends.cpu.fourstep import block_ranges, split_sizes
from distprove.dist.output import verify_write
from distprove.dist.tasks import KeyInfo, ProofSpec
from distprove.dist.work import (
    collect_parts,
    h_forward_rows,
    h_inverse_rows,
    msm_proof,
    msm_windows,
    ntt_assemble,
    ntt_columns,
    ntt_rows,
    prepare,
    proof_done,
    prove_group,
    reduce_assemble,
)
from distprove.stages.msm import num_windows

from distprove.choices import PLANNER_MODES as MODES
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
"""The same limits for groups that check their proofs in the task: a checked group's end also
pays the batched check's fixed part (G1 sums, three Miller loops, the final exponentiation:
60-100 ms of host time on the H200 machine with the exact final exponentiation, ~27 ms on the dev
VM with the x-chain one) with the device idle, so groups go larger. In groups of four at 2^20 a
checked batch ran at 13.0 proofs/s against 15.8 unchecked (1 x H200); in groups of 16, 14.9."""


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
    group_domain: int = GROUP_DOMAIN
    """Data mode: an unchecked group of fused proofs holds at most this many domain points."""

    def fuses(self, info: KeyInfo) -> bool:
        """Whether a proof of this key is one prove-whole task."""
        return self.mode == "data" and self.fuse_below is not None and info.domain_size < self.fuse_below

    @property
    def writes_in_task(self) -> bool:
        """Whether a prove-whole task checks (``verify``) and writes its proofs itself: whenever the
        proofs are assembled on the workers. A separate verify-write task per group held the GPU
        idle for the group's whole check (9 ms of worker time per proof on 2 x H200 only to
        write files); in the task, each proof's Miller loop runs beside the next proof's MSMs
        and the group pays one final exponentiation (work.prove_group)."""
        return self.assemble_on_workers

    def proofs_per_task(self, info: KeyInfo, n_proofs: int) -> int:
        """How many of the batch's ``n_proofs`` proofs of this key one prove-whole task proves.

        A Dask task costs ~2 ms of worker time around its body (measured on 2 x H200), and a
        group is pipelined (one proof's host assembly beside the next one's MSMs) except at its
        ends, so every task boundary costs about one proof's host work with the device idle;
        grouping pays it once per task. Groups stay below :attr:`group_domain` domain points (but
        hold two proofs of a larger key), at most ``max_proofs_per_task``, and small enough that
        every worker gets :data:`TASKS_PER_WORKER` tasks to balance (the last task of a worker is
        the batch's tail); groups that check their proofs (:attr:`writes_in_task` with ``verify``)
        use :data:`CHECKED_GROUP_DOMAIN` and :data:`CHECKED_TASKS_PER_WORKER` instead."""
        if not self.fuses(info):
            return 1
        checked = self.verify and self.writes_in_task
        domain = CHECKED_GROUP_DOMAIN if checked else self.group_domain
        tasks = CHECKED_TASKS_PER_WORKER if checked else TASKS_PER_WORKER
        balance = n_proofs // (tasks * max(1, len(self.workers)))
        return max(1, min(self.max_proofs_per_task, max(2, domain // info.domain_size), balance))

    def window_ranges(self, w_count: int) -> list[tuple[int, int]]:
        """The MSM window ranges of one task each in split mode: ``windows_per_task`` windows
        (data mode runs all five MSMs whole in one task)."""
        step = max(1, self.windows_per_task)
        return [(lo, min(lo + step, w_count)) for lo in range(0, w_count, step)]

    def hands_h_over(self, info: KeyInfo) -> bool:
        """Whether the prepare downloads the H scalars into its result for H tasks on other
        workers: only split mode pins H tasks elsewhere (see :func:`split_hands_h_over`)."""
        return self.mode == "split" and split_hands_h_over(info.backend)

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
    mode: str, n_proofs: int, n_workers: int, max_domain: int, split_min_domain: int | None, split_max_proofs_per_worker: int
) -> str:
    """The batch's mode; ``auto`` is ``split`` when the largest key's domain is at least
    ``split_min_domain`` (None: never) and there are fewer than ``split_max_proofs_per_worker``
    proofs per worker (a few large proofs: latency), else ``data`` (``distprove.planner`` in the
    configuration: ``split-min-domain`` for CPU workers, ``gpu-split-min-domain`` for GPU ones)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (choose one of {', '.join(MODES)})")
    if mode != "auto":
        return mode
    if (n_workers > 1 and split_min_domain is not None and max_domain >= split_min_domain
            and n_proofs < split_max_proofs_per_worker * n_workers):
        return "split"
    return "data"


def submit_proof(client: Client, spec: ProofSpec, info: KeyInfo, plan: Plan, index: int, priority: int = 0) -> tuple[Future, list[Future]]:
    """Submit one proof's prepare, MSM and reducer tasks (a fused key's proofs go through
    :func:`submit_group`); returns (the reducer's future, every future of the proof).

    The reducer's result is an :class:`~distprove.dist.tasks.Assembled` proof for the verify-write
    tasks, or with ``plan.assemble_on_workers`` off the :class:`~distprove.dist.tasks.Collected`
    window sums."""
    name, tag = spec.name, plan.tag
    nw = len(plan.workers)
    common: dict[str, Any] = {"pure": False, "priority": priority}
    fourstep = plan.uses_fourstep(info)
    # The H scalars stay on the preparing worker's device unless plan.hands_h_over: an H task that
    # runs elsewhere recomputes them from the witness (work._msm_scalars).
    prepared = client.submit(prepare, spec, not fourstep, plan.hands_h_over(info), key=("prove-prepare", name, tag), **common)
    futures = [prepared]
    h_source: Future = prepared
    if fourstep:
        h_source, ntt_futs = submit_h_fourstep(client, name, prepared, info.domain_size, plan.workers, tag, priority)
        futures += ntt_futs
    if plan.mode == "data":  # one task for the five MSMs: they overlap on the device, four round trips fewer
        parts = [client.submit(msm_proof, spec, prepared, None, key=("msm-windows", name, "all", 0, tag), **common)]
    else:  # split: window ranges pinned round-robin (loosely) to the workers
        parts = []
        slot = index
        for which in MSM_NAMES:
            c = info.widths[which]
            src = h_source if which == "H" else prepared
            for lo, hi in plan.window_ranges(num_windows(c)):
                placement = {"workers": [plan.workers[slot % nw]], "allow_other_workers": True}
                slot += 1
                parts.append(
                    client.submit(
                        msm_windows, spec, which, src, c, lo, hi, key=("msm-windows", name, which, lo, tag), **placement, **common
                    )
                )
    futures += parts
    if plan.assemble_on_workers:
        reducer = client.submit(reduce_assemble, spec, parts, key=("reduce-assemble", name, tag), **common)
    else:
        reducer = client.submit(collect_parts, spec, parts, key=("reduce-collect", name, tag), **common)
    futures.append(reducer)
    return reducer, futures


def submit_group(client: Client, specs: Sequence[ProofSpec], info: KeyInfo, plan: Plan, priority: int = 0) -> Future:
    """One prove-whole task for one or more fused proofs of one key, keyed by the first proof's
    name (and the number after it). Its result is a list, one item per proof: with
    :attr:`Plan.writes_in_task` the :class:`~distprove.dist.tasks.Outcome` (the task wrote the
    proof), else what a reducer returns, a failed proof as :class:`~distprove.dist.tasks.Failed`."""
    name = specs[0].name if len(specs) == 1 else f"{specs[0].name}+{len(specs) - 1}"
    return client.submit(
        prove_group, list(specs), None, plan.assemble_on_workers, plan.writes_in_task, plan.verify,
        key=("prove-whole", name, plan.tag), pure=False, priority=priority,
    )


MARKER = "proofs"
"""The marker tasks' prefix (not a stage: the report's stage seconds leave it out)."""
MARKER_PRIORITY = 1 << 21
"""Markers run as soon as their proof is done, before the next proof's tasks."""


def submit_markers(client: Client, names: Sequence[str], source: Future, plan: Plan) -> list[Future]:
    """One ("proofs", name, tag) task per proof of ``names``, on the task whose end means those
    proofs are done: a prove-whole task that writes its proofs (checked and written), else the
    reducer or a group that returns its sums (the proof made; the check and write follow in a
    verify-write task or the client's pool).

    The dashboard's progress bars (``/status``) count a prefix's tasks that are not forgotten, and
    the batch releases a proof's tasks as soon as it has its outcome, so the stage bars only ever
    show what is left, and a prove-whole bar counts groups of up to 32 proofs. The batch holds
    these markers (a few bytes each) until it ends, so the "proofs" bar reads how many of the
    batch's proofs are done out of all of them. A marker whose proof failed with an exception
    ends erred (red in the bar)."""
    return [
        client.submit(proof_done, source, name, key=(MARKER, name, plan.tag), pure=False, priority=MARKER_PRIORITY)
        for name in names
    ]


def submit_verify_write(client: Client, assembled: Sequence[Future], plan: Plan, group: int) -> Future:
    """One task that checks the reducers' proofs with one batched pairing check and writes those
    that pass (a future of their :class:`~distprove.dist.tasks.Outcome` list)."""
    return client.submit(
        verify_write, list(assembled), plan.verify, key=("verify-write", group, plan.tag), pure=False, priority=1 << 20
    )


def _transpose(client: Client, name: str, stage: int, blocks: Sequence[Future], n_rows: int, tag: str, priority: int) -> list[list[Future]]:
    """Step 3 through Dask: piece j of every column block, for each row block j (small getitem tasks
    that run where the block lives, so each row task fetches only its own pieces)."""
    return [
        [
            client.submit(operator.getitem, blk, j, key=("ntt-transpose", name, stage, i, j, tag), pure=False, priority=priority)
            for i, blk in enumerate(blocks)
        ]
        for j in range(n_rows)
    ]


def _spread(workers: Sequence[str], i: int) -> dict[str, Any]:
    return {"workers": [workers[i % len(workers)]], "allow_other_workers": True} if workers else {}


def submit_ntt(client: Client, name: str, values: Any, n: int, inverse: bool, workers: Sequence[str], tag: str = "", priority: int = 0) -> Future:
    """A four-step NTT of (V, n, 8) vectors (a future or array) across ``workers``: a future of (V, n, 8)."""
    n1, n2 = split_sizes(n)
    parts = max(1, len(workers))
    rows = block_ranges(n1, parts)
    cols = [
        client.submit(ntt_columns, values, n, lo, hi, rows, inverse, key=("ntt-columns", name, i, tag), pure=False, priority=priority, **_spread(workers, i))
        for i, (lo, hi) in enumerate(block_ranges(n2, parts))
    ]
    pieces = _transpose(client, name, 0, cols, len(rows), tag, priority)
    out = [
        client.submit(ntt_rows, pieces[j], n, inverse, key=("ntt-rows", name, j, tag), pure=False, priority=priority, **_spread(workers, j))
        for j in range(len(rows))
    ]
    return client.submit(ntt_assemble, out, key=("ntt-collect", name, tag), pure=False, priority=priority)


def submit_h_fourstep(client: Client, name: str, prepared: Future, n: int, workers: Sequence[str], tag: str = "", priority: int = 0) -> tuple[Future, list[Future]]:
    """H scalars of one proof by the four-step NTT across ``workers``.

    iNTT (columns, transpose, rows) -> odd-coset scaling -> NTT (columns in the same task, since
    the inverse's row blocks are the forward transform's column blocks, then transpose, rows) ->
    hs = a·b - c per block -> natural order. Returns (a future of the (1, n, 8) H scalars, all futures).
    """
    n1, n2 = split_sizes(n)
    parts = max(1, len(workers))
    rows_inv = block_ranges(n1, parts)
    rows_fwd = block_ranges(n2, parts)
    cols = [
        client.submit(ntt_columns, prepared, n, lo, hi, rows_inv, True, key=("ntt-columns", name, i, tag), pure=False, priority=priority, **_spread(workers, i))
        for i, (lo, hi) in enumerate(block_ranges(n2, parts))
    ]
    pieces = _transpose(client, name, 0, cols, len(rows_inv), tag, priority)
    mid = [
        client.submit(h_inverse_rows, pieces[j], n, lo, rows_fwd, key=("ntt-rows-inverse", name, j, tag), pure=False, priority=priority, **_spread(workers, j))
        for j, (lo, _) in enumerate(rows_inv)
    ]
    pieces2 = _transpose(client, name, 1, mid, len(rows_fwd), tag, priority)
    out = [
        client.submit(h_forward_rows, pieces2[l], n, key=("ntt-rows-forward", name, l, tag), pure=False, priority=priority, **_spread(workers, l))
        for l in range(len(rows_fwd))
    ]
    hs = client.submit(ntt_assemble, out, key=("ntt-collect", name, tag), pure=False, priority=priority)
    return hs, cols + [f for row in pieces for f in row] + mid + [f for row in pieces2 for f in row] + out + [hs]
