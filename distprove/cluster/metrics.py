"""Prometheus metrics of distprove's worker processes and of the scheduler.

The metrics live in prometheus_client's global registry, which distributed already serves at
``/metrics`` on every worker's HTTP port (the worker's ``--dashboard-address``) and on the
scheduler's dashboard port, next to its own ``dask_*`` metrics; Prometheus scrapes them there,
no extra server needed. They are created on first use, so a process exports only its own kind.

On the workers (the task code, :mod:`distprove.cluster.work` and :mod:`~distprove.cluster.output`,
calls the recording functions):

* ``distprove_proofs_total{key}``: proofs made and written, per key;
* ``distprove_proofs_failed_total{key}``: proofs that failed (bad witness, invalid proof, error),
  0 from the key's first proof on;
* ``distprove_stage_seconds{stage}``: histogram of the seconds spent per prover stage (the
  stages of :data:`distprove.cluster.state.STAGES` as a proof's seconds name them: witness,
  gather, ntt, msm, or msm_A ... msm_H in split mode, assemble, check, write; witness-wait in
  a batch from inputs);
* ``distprove_resident_key_bytes``: GPU memory held by the keys resident on this worker.

On the scheduler (the dashboard plugin, :mod:`distprove.cluster.dashboard`, sets them from the
batches' progress, :mod:`distprove.cluster.progress`):

* ``distprove_batch_proofs_total``, ``distprove_batch_proofs_done``,
  ``distprove_batch_proofs_failed``, ``distprove_batch_proofs_skipped`` (gauges): the proofs of
  the batches running (summed), else of the last batch, updated as proofs are written;
* ``distprove_cluster_proofs_total``, ``distprove_cluster_proofs_failed_total`` (counters): proofs
  written and failed by every batch since the scheduler started;
* ``distprove_cluster_batches_total`` (counter): batches started.

Per-task-group compute times need nothing from distprove: the scheduler's own ``/metrics`` has
them (``dask_scheduler_tasks_compute_seconds_total{task_prefix_name=...}``). Setting
``distprove.metrics.enabled`` to false turns every worker's recording function into a no-op.
"""

from __future__ import annotations

import os
from collections import Counter as TallyCounter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from distprove import config

# Stage times range from milliseconds (small MSM window ranges) to minutes (2^24-constraint NTTs).
STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


@dataclass(frozen=True)
class _Metrics:
    proofs: Counter
    failed: Counter
    stage_seconds: Histogram
    resident_bytes: Gauge


@cache
def _metrics() -> _Metrics:
    """Create (once per process) and register the metrics in prometheus_client's global registry."""
    return _Metrics(
        proofs=Counter("distprove_proofs", "Groth16 proofs made and written, per key.", ["key"]),
        failed=Counter("distprove_proofs_failed", "Proofs that failed (bad input, invalid proof, error), per key.", ["key"]),
        stage_seconds=Histogram(
            "distprove_stage_seconds", "Seconds spent per prover stage.", ["stage"], buckets=STAGE_BUCKETS
        ),
        resident_bytes=Gauge("distprove_resident_key_bytes", "GPU memory held by the keys resident on this worker, in bytes."),
    )


@dataclass(frozen=True)
class SchedulerMetrics:
    """The scheduler's series (:func:`scheduler_metrics`)."""

    batch_total: Gauge
    batch_done: Gauge
    batch_failed: Gauge
    batch_skipped: Gauge
    proofs: Counter
    failed: Counter
    batches: Counter


@cache
def scheduler_metrics() -> SchedulerMetrics:
    """Create (once per process) and register the scheduler's series in prometheus_client's
    global registry."""
    return SchedulerMetrics(
        batch_total=Gauge("distprove_batch_proofs_total", "Proofs of the running batches (else of the last batch)."),
        batch_done=Gauge("distprove_batch_proofs_done", "Proofs written of the running batches (else of the last batch)."),
        batch_failed=Gauge("distprove_batch_proofs_failed", "Proofs failed of the running batches (else of the last batch)."),
        batch_skipped=Gauge("distprove_batch_proofs_skipped", "Proofs skipped (outputs existed and verify) of the running batches (else of the last batch)."),
        proofs=Counter("distprove_cluster_proofs", "Proofs written by every batch since the scheduler started."),
        failed=Counter("distprove_cluster_proofs_failed", "Proofs failed in every batch since the scheduler started."),
        batches=Counter("distprove_cluster_batches", "Batches started since the scheduler started."),
    )


def _enabled() -> bool:
    return config.get_bool("metrics.enabled")


def key_label(key: Any) -> str:
    """The ``key`` label of a key: the file name of its store or .zkey (a string is used as is)."""
    if isinstance(key, (str, os.PathLike)):
        return os.path.basename(os.path.normpath(os.fspath(key)))
    return os.path.basename(os.path.normpath(key.path))


def record_proof(key: Any, ok: bool) -> None:
    """Count one proof of ``key`` (a key object, path or label) as done (``ok``) or failed."""
    if _enabled():
        m = _metrics()
        label = key_label(key)
        (m.proofs if ok else m.failed).labels(key=label).inc()
        (m.failed if ok else m.proofs).labels(key=label)  # both series exist from the key's first proof


def record_stage(stage: str, seconds: float) -> None:
    """Add one observation of ``seconds`` spent in ``stage`` to the stage histogram."""
    if _enabled():
        _metrics().stage_seconds.labels(stage=stage).observe(seconds)


def record_timings(timings: dict[str, float]) -> None:
    """Record every stage of a ``Proof.timings`` dict except the ``total`` (the setting read once)."""
    if _enabled():
        histogram = _metrics().stage_seconds
        for stage, seconds in timings.items():
            if stage != "total":
                histogram.labels(stage=stage).observe(seconds)


def record_proofs(proofs: Iterable[tuple[Any, bool, dict[str, float]]]) -> None:
    """:func:`record_proof` and :func:`record_timings` of many proofs, each (key, ok, timings):
    the counters incremented once per key by their counts, each stage's histogram child looked up
    once (prometheus observes one value at a time)."""
    if not _enabled():
        return
    m = _metrics()
    counts: TallyCounter[tuple[str, bool]] = TallyCounter()
    children: dict[str, Any] = {}
    for key, ok, timings in proofs:
        counts[key_label(key), ok] += 1
        for stage, seconds in timings.items():
            if stage != "total":
                child = children.get(stage)
                if child is None:
                    child = children[stage] = m.stage_seconds.labels(stage=stage)
                child.observe(seconds)
    for (label, ok), n in counts.items():
        (m.proofs if ok else m.failed).labels(key=label).inc(n)
        (m.failed if ok else m.proofs).labels(key=label)  # both series exist from the key's first proof


def set_resident_bytes(n: int) -> None:
    """Set the gauge of GPU memory held by this worker's resident keys to ``n`` bytes."""
    if _enabled():
        _metrics().resident_bytes.set(n)

