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
    ("msm-points", name, share, tag)                points mode: the five partial MSMs over one
                                                    worker's share of the key's points
    ("reduce-assemble", name, tag)                  Horner combine and blinding: the proof (points
                                                    mode: the shares' partial points added first)
                                                    (("reduce-collect", ...) gathers the window sums
                                                    instead when the client's pool assembles)
    ("verify-write", group, tag)                    one batched pairing check of the proofs that
                                                    are ready, then each valid one written once
    ("ntt-columns" | "ntt-transpose" | "ntt-rows-inverse" | "ntt-rows-forward" | "ntt-collect", ...)
                                                    the four-step H computation across workers

(dask's ``key_split`` drops an 8-letter word starting with a-f as if it were a hex token, so
the dashboard shows the reducer group as ``reduce``.) ``tag`` is unique per batch so that reruns
in one client never reuse a finished key, and ends every key: a worker reports the proofs it
writes for the batch its task's key names (:mod:`distprove.cluster.progress`). Results stay
on the workers (witness, scalars and evaluations move worker to worker at most); keys never travel:
tasks carry the key's path and content hash and workers keep it resident (:mod:`distprove.cluster.state`).
A worker also keeps the device-side witness and H scalars of the proofs it prepared, so MSM
tasks that run where their prepare ran upload nothing; the reducer drops them.

How a batch is laid out (the mode, which keys fuse, proofs per task, window ranges, the four-step
threshold) is :mod:`distprove.cluster.planner`'s :class:`~distprove.cluster.planner.Plan`; this module
only builds the tasks it describes.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from distributed import Client, Future

from distprove.cluster.taskkeys import (
    MSM_POINTS, MSM_WINDOWS, NTT_COLLECT, NTT_COLUMNS, NTT_ROWS, NTT_ROWS_FORWARD, NTT_ROWS_INVERSE, NTT_TRANSPOSE,
    PROVE_PREPARE, PROVE_WHOLE, REDUCE_ASSEMBLE, REDUCE_COLLECT, VERIFY_WRITE,
)
from distprove.groth16 import MSM_NAMES
from distprove.backends.cpu.fourstep import block_ranges, split_sizes
from distprove.cluster.output import verify_write
from distprove.cluster.planner import Plan
from distprove.cluster.tasks import KeyInfo, ProofSpec
from distprove.cluster.work import (
    collect_parts,
    collect_shares,
    h_forward_rows,
    h_inverse_rows,
    msm_proof,
    msm_share,
    msm_windows,
    ntt_assemble,
    ntt_columns,
    ntt_rows,
    prepare,
    prove_group,
    reduce_assemble,
    reduce_shares,
)
from distprove.stages.msm import num_windows


def submit_proof(client: Client, spec: ProofSpec, info: KeyInfo, plan: Plan, index: int, priority: int = 0) -> tuple[Future, list[Future]]:
    """Submit one proof's prepare, MSM and reducer tasks (a fused key's proofs go through
    :func:`submit_group`); returns (the reducer's future, every future of the proof).

    The reducer's result is an :class:`~distprove.cluster.tasks.Assembled` proof for the verify-write
    tasks, or with ``plan.assemble_on_workers`` off the :class:`~distprove.cluster.tasks.Collected`
    window sums."""
    name, tag = spec.name, plan.tag
    nw = len(plan.workers)
    common: dict[str, Any] = {"pure": False, "priority": priority, **plan.place()}
    fourstep = plan.uses_fourstep(info)
    # The H scalars stay on the preparing worker's device unless plan.hands_h_over: an H task that
    # runs elsewhere recomputes them from the witness (work._msm_scalars).
    points = plan.mode == "points"
    prepared = client.submit(prepare, spec, not fourstep, plan.hands_h_over(info), points, key=(PROVE_PREPARE, name, tag),
                             **common)
    futures = [prepared]
    h_source: Future = prepared
    if fourstep:
        h_source, ntt_futs = submit_h_fourstep(client, name, prepared, info.domain_size, plan.workers, tag, priority,
                                               plan.provers_only)
        futures += ntt_futs
    if plan.mode == "data":  # one task for the five MSMs: they overlap on the device, four round trips fewer
        parts = [client.submit(msm_proof, spec, prepared, None, key=(MSM_WINDOWS, name, "all", 0, tag), **common)]
    elif points:  # one task per share of the key's points, share i (loosely) on worker i, every proof alike
        parts = [
            client.submit(msm_share, spec, prepared, share, key=(MSM_POINTS, name, share.index, tag),
                          **{**common, **plan.place(plan.workers[share.index])})
            for share in plan.key_shares(info) if not share.empty
        ]
    else:  # split: window ranges pinned round-robin (loosely) to the workers
        parts = []
        slot = index
        for which in MSM_NAMES:
            c = info.widths[which]
            src = h_source if which == "H" else prepared
            for lo, hi in plan.window_ranges(num_windows(c)):
                placement = {**common, **plan.place(plan.workers[slot % nw])}
                slot += 1
                parts.append(
                    client.submit(
                        msm_windows, spec, which, src, c, lo, hi, key=(MSM_WINDOWS, name, which, lo, tag), **placement
                    )
                )
    futures += parts
    if plan.assemble_on_workers:
        reducer = client.submit(reduce_shares if points else reduce_assemble, spec, parts,
                                key=(REDUCE_ASSEMBLE, name, tag), **common)
    else:
        reducer = client.submit(collect_shares if points else collect_parts, spec, parts,
                                key=(REDUCE_COLLECT, name, tag), **common)
    futures.append(reducer)
    return reducer, futures


def submit_group(
    client: Client, specs: Sequence[ProofSpec], info: KeyInfo, plan: Plan, priority: int = 0, worker: str | None = None,
    witnesses: Future | None = None,
) -> Future:
    """One prove-whole task for one or more fused proofs of one key, keyed by the first proof's
    name (and the number after it), on ``worker`` when it is there (an input group's, where its
    witnesses are computed; :meth:`Plan.place`); with ``witnesses``, the witness task whose
    result (each proof's witness values, from a witness worker) the task takes as a dependency.
    Its result is a list, one item per proof: with
    :attr:`Plan.writes_in_task` the :class:`~distprove.cluster.tasks.Outcome` (the task wrote the
    proof), else what a reducer returns, a failed proof as :class:`~distprove.cluster.tasks.Failed`."""
    name = specs[0].name if len(specs) == 1 else f"{specs[0].name}+{len(specs) - 1}"
    return client.submit(
        prove_group, list(specs), None, plan.assemble_on_workers, plan.writes_in_task, plan.verify,
        witnesses=witnesses, key=(PROVE_WHOLE, name, plan.tag), pure=False, priority=priority, **plan.place(worker),
    )


def submit_verify_write(client: Client, assembled: Sequence[Future], plan: Plan, group: int) -> Future:
    """One task that checks the reducers' proofs with one batched pairing check and writes those
    that pass (a future of their :class:`~distprove.cluster.tasks.Outcome` list)."""
    return client.submit(
        verify_write, list(assembled), plan.verify, key=(VERIFY_WRITE, group, plan.tag), pure=False, priority=1 << 20,
        **plan.place(),
    )


def _transpose(client: Client, name: str, stage: int, blocks: Sequence[Future], n_rows: int, tag: str, priority: int) -> list[list[Future]]:
    """Step 3 through Dask: piece j of every column block, for each row block j (small getitem tasks
    that run where the block lives, so each row task fetches only its own pieces)."""
    return [
        [
            client.submit(operator.getitem, blk, j, key=(NTT_TRANSPOSE, name, stage, i, j, tag), pure=False, priority=priority)
            for i, blk in enumerate(blocks)
        ]
        for j in range(n_rows)
    ]


def _spread(workers: Sequence[str], i: int, strict: bool = False) -> dict[str, Any]:
    """Block ``i``'s placement: loosely on one of ``workers`` in turn, or (``strict``: a cluster
    with witness workers) on any of them."""
    if strict:
        return {"workers": list(workers), "allow_other_workers": False}
    return {"workers": [workers[i % len(workers)]], "allow_other_workers": True} if workers else {}


def submit_ntt(client: Client, name: str, values: Any, n: int, inverse: bool, workers: Sequence[str], tag: str = "", priority: int = 0) -> Future:
    """A four-step NTT of (V, n, 8) vectors (a future or array) across ``workers``: a future of (V, n, 8)."""
    n1, n2 = split_sizes(n)
    parts = max(1, len(workers))
    rows = block_ranges(n1, parts)
    cols = [
        client.submit(ntt_columns, values, n, lo, hi, rows, inverse, key=(NTT_COLUMNS, name, i, tag), pure=False, priority=priority, **_spread(workers, i))
        for i, (lo, hi) in enumerate(block_ranges(n2, parts))
    ]
    pieces = _transpose(client, name, 0, cols, len(rows), tag, priority)
    out = [
        client.submit(ntt_rows, pieces[j], n, inverse, key=(NTT_ROWS, name, j, tag), pure=False, priority=priority, **_spread(workers, j))
        for j in range(len(rows))
    ]
    return client.submit(ntt_assemble, out, key=(NTT_COLLECT, name, tag), pure=False, priority=priority)


def submit_h_fourstep(client: Client, name: str, prepared: Future, n: int, workers: Sequence[str], tag: str = "", priority: int = 0,
                      strict: bool = False) -> tuple[Future, list[Future]]:
    """H scalars of one proof by the four-step NTT across ``workers``.

    iNTT (columns, transpose, rows) -> odd-coset scaling -> NTT (columns in the same task, since
    the inverse's row blocks are the forward transform's column blocks, then transpose, rows) ->
    hs = a·b - c per block -> natural order. ``strict``: every block on any of ``workers`` (the
    provers of a cluster with witness workers), not loosely on one of them in turn. Returns (a future of the (1, n, 8) H scalars, all futures).
    """
    n1, n2 = split_sizes(n)
    parts = max(1, len(workers))
    rows_inv = block_ranges(n1, parts)
    rows_fwd = block_ranges(n2, parts)
    cols = [
        client.submit(ntt_columns, prepared, n, lo, hi, rows_inv, True, key=(NTT_COLUMNS, name, i, tag), pure=False, priority=priority, **_spread(workers, i, strict))
        for i, (lo, hi) in enumerate(block_ranges(n2, parts))
    ]
    pieces = _transpose(client, name, 0, cols, len(rows_inv), tag, priority)
    mid = [
        client.submit(h_inverse_rows, pieces[j], n, lo, rows_fwd, key=(NTT_ROWS_INVERSE, name, j, tag), pure=False, priority=priority, **_spread(workers, j, strict))
        for j, (lo, _) in enumerate(rows_inv)
    ]
    pieces2 = _transpose(client, name, 1, mid, len(rows_fwd), tag, priority)
    out = [
        client.submit(h_forward_rows, pieces2[l], n, key=(NTT_ROWS_FORWARD, name, l, tag), pure=False, priority=priority, **_spread(workers, l, strict))
        for l in range(len(rows_fwd))
    ]
    hs = client.submit(ntt_assemble, out, key=(NTT_COLLECT, name, tag), pure=False, priority=priority,
                       **(_spread(workers, 0, strict) if strict else {}))
    return hs, cols + [f for row in pieces for f in row] + mid + [f for row in pieces2 for f in row] + out + [hs]
