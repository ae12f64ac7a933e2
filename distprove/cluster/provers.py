"""Keeps a batch's proof tasks on the provers while provers come and go, in a cluster with
witness workers.

There a proof task is held strictly to the provers' addresses (:meth:`distprove.cluster.planner.Plan.place`):
Dask has no way to keep a task off some workers, and a loose restriction would send a task whose
provers are gone to a witness worker. A prover that joins during the batch, or one its nanny
restarts after it died (at a new address), would then never get a task: :class:`FollowProvers`,
a scheduler plugin, holds each proof task that comes in to the provers the scheduler knows
then, and adds each worker that joins without the witness resource to the restrictions of the
batch's proof tasks, before the scheduler looks for a worker for the tasks that had none.
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from distprove.cluster.taskkeys import PROVER_TASKS
from distprove.witness.pool import WITNESS_RESOURCE

PLUGIN_NAME = "distprove-follow-provers"


def _held(ts: Any) -> bool:
    """Whether a scheduler task is one of a batch's held strictly to the provers."""
    return (bool(ts.worker_restrictions) and not ts.loose_restrictions and isinstance(ts.key, tuple) and bool(ts.key)
            and ts.key[0] in PROVER_TASKS)


def _is_prover(ws: Any) -> bool:
    return ws.resources.get(WITNESS_RESOURCE, 0) < 1


class FollowProvers(SchedulerPlugin):
    """On the scheduler: the tasks held strictly to the provers (a tuple key of
    :data:`~distprove.cluster.taskkeys.PROVER_TASKS`) are held to the provers there are: a task that comes in to those the
    scheduler knows then (the client's list may hold a prover gone since), and a worker that
    joins without the witness resource is added to every such task's."""

    name = PLUGIN_NAME

    def update_graph(self, scheduler: Any, *, tasks: list[Any], **kwargs: Any) -> None:
        provers = {addr for addr, ws in scheduler.workers.items() if _is_prover(ws)}
        if not provers:
            return
        for key in tasks:
            ts = scheduler.tasks.get(key)
            if ts is not None and _held(ts):
                ts.worker_restrictions = set(provers)

    def add_worker(self, scheduler: Any, worker: str) -> None:
        ws = scheduler.workers.get(worker)
        if ws is None or not _is_prover(ws):
            return
        for ts in scheduler.tasks.values():
            if _held(ts):
                ts.worker_restrictions.add(worker)


def _registered(dask_scheduler: Any) -> bool:
    return PLUGIN_NAME in dask_scheduler.plugins


def follow_provers(client: Any) -> None:
    """Register :class:`FollowProvers` on the scheduler, once."""
    if not client.run_on_scheduler(_registered):
        client.register_plugin(FollowProvers(), name=PLUGIN_NAME)
